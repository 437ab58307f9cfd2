// The scheduled run: an automation's prompt on a schedule, on a branch of its own from the default
// branch, with no person behind it (the app is its requester).
import type { JobKind } from "../../run/kind.ts";
import {
  isScheduledRun,
  openScheduled,
  runScheduled,
  type ScheduledAttempt,
  type ScheduledJob,
  scheduledPlace,
} from "./run.ts";

export const scheduledRun: JobKind<ScheduledJob, ScheduledAttempt> = {
  name: "scheduled run",
  freshGate: false,
  told: "requester",
  claims: isScheduledRun,
  place: scheduledPlace,
  refused: (job, { deps }, why) =>
    openScheduled(job, deps).end("failed", "refused" in why ? why.refused : `refused: ${why.via}`),
  open: (job, { deps }) => Promise.resolve(openScheduled(job, deps)),
  work: runScheduled,
};
