// `/vmpilot remember <text>`: the requester's lesson proposed in the pull request from
// `vmpilot/memory` (lessons.ts), with no workspace and no model.
import { remember as proposeRemembered } from "../lessons.ts";
import type { PipelineMode } from "./mode.ts";

export const remember: PipelineMode = {
  steps: ["acknowledged", "pull_request"],
  pushes: false,
  readsItem: false,
  runsSetup: false,
  // It ends here, before any workspace opens.
  prepare: async (job) => ({ ended: await proposeRemembered(job) }),
  finish() {
    throw new Error("remember runs no agent");
  },
};
