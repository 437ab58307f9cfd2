// Every mode a job can run in, by name.
import type { Mode } from "../request.ts";
import { merge } from "./merge.ts";
import type { PipelineMode } from "./mode.ts";
import { ci, fix, threads } from "./push.ts";
import { plan, review, triage } from "./read-only.ts";
import { remember } from "./remember.ts";

export const MODES: Record<Mode, PipelineMode> = {
  fix,
  threads,
  ci,
  merge,
  plan,
  review,
  triage,
  remember,
};
