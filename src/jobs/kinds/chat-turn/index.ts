// The chat turn: a message to the chat face (`/v1/chat/completions`) or `vmpilot chat`, on a
// repository or on a scratch workspace of its owner's. Its person waits for the reply, so every
// way it ends is the reply's last event (end.ts).
import type { Job } from "../../../store/jobs.ts";
import { onRow, type RowAttempt } from "../../run/attempt.ts";
import type { JobKind } from "../../run/kind.ts";
import { endTurn, type Turn } from "./end.ts";
import { runTurn, turnPlace } from "./run.ts";

export const chatTurn: JobKind<Job, RowAttempt<Turn>> = {
  name: "chat turn",
  freshGate: true,
  told: "you",
  claims: (job): job is Job => job.trigger === "chat",
  place: turnPlace,
  ...onRow({ awaited: true, ended: endTurn }),
  work: runTurn,
};
