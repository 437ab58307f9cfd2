// Every kind of job a worker runs, each found by its own detector (claims): a chat turn, a
// scheduled run, or an issue job. A new kind is a folder beside these, on the spine (run/).
import type { JobKind } from "../run/kind.ts";
import { chatTurn } from "./chat-turn/index.ts";
import { issueJob } from "./issue/index.ts";
import { scheduledRun } from "./scheduled/index.ts";

export const KINDS: readonly JobKind[] = [chatTurn, scheduledRun, issueJob];
