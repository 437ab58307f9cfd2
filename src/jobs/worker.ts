// Runs queued jobs in this process: each through the one runner (run/runner.ts), as the kind that
// claims it (kinds/); and the small tasks beside them (notices, config checks, ready checks,
// automations' schedules).
import { annotate } from "../log/trace.ts";
import { jobDuration } from "../metrics.ts";
import { handleAutomationMessage } from "./automations/schedules.ts";
import { runConfigCheck } from "./kinds/config-check/run.ts";
import { KINDS } from "./kinds/index.ts";
import { acknowledgeWaiting } from "./kinds/issue/acknowledge.ts";
import { reportDead } from "./kinds/issue/dead.ts";
import { runReadyCheck } from "./kinds/ready/run.ts";
import type { Queue } from "./queue/queue.ts";
import type { OpenDeps, WorkDeps } from "./run/deps.ts";
import { runJob } from "./run/runner.ts";

export interface WorkerDeps extends OpenDeps {
  queue: Queue;
  /** Omitted, jobs end once answered; the intake tests run the worker that way. */
  work?: WorkDeps;
  /**
   * The app's slug, for the jobs of scheduled automations (the app is their requester). Without
   * it this worker takes no automation messages.
   */
  appSlug?: () => Promise<string>;
}

export async function startWorker(deps: WorkerDeps): Promise<void> {
  const { appSlug } = deps;
  await deps.queue.work(
    async (run) => {
      const end = jobDuration.startTimer();
      let outcome = "retry";
      try {
        outcome = await runJob(KINDS, run, deps, deps.work);
      } finally {
        end({ outcome });
        annotate({ "vmpilot.job.outcome": outcome });
      }
    },
    {
      onDead: (dead) => reportDead(deps, dead),
      onNotice: (jobId, signal) => acknowledgeWaiting(deps, jobId, signal),
      onConfigCheck: (check, signal) => runConfigCheck(deps, check, signal),
      onReady: (check, signal) => runReadyCheck(deps, check, signal),
      ...(appSlug && {
        onAutomation: (message, id, signal) =>
          handleAutomationMessage({ ...deps, appSlug }, message, id, signal),
      }),
    },
  );
}
