import type pg from "pg";
import type { Clock } from "pg-boss";
import type { Logger } from "../../log/logger.ts";
import { cancelRequested } from "../../store/job-lifecycle.ts";

export interface CancelWatch {
  /** The controller aborts once someone, in any process, asks to cancel the job. */
  track(jobId: number): AbortController;
  untrack(jobId: number): void;
  stop(): void;
}

/**
 * Polls the jobs table for cancel requests on the jobs this process runs. Polling rather than
 * LISTEN/NOTIFY because the embedded database's connections share one session, and one small
 * query per interval for all running jobs costs nothing. On the queue's clock when it has one (a
 * test's), which then fires the checks as it moves.
 */
export function watchCancellations(
  pool: pg.Pool,
  intervalMs: number,
  logger: Logger,
  clock?: Clock,
): CancelWatch {
  const running = new Map<number, AbortController>();
  let checking = false;
  const check = async () => {
    if (checking || running.size === 0) return;
    checking = true;
    try {
      for (const jobId of await cancelRequested(pool, [...running.keys()])) {
        const controller = running.get(jobId);
        if (controller && !controller.signal.aborted) {
          logger.info({ jobId }, "job cancelled");
          controller.abort(new Error("job cancelled"));
        }
      }
    } catch (error) {
      logger.warn({ err: error }, "checking for cancelled jobs failed");
    } finally {
      checking = false;
    }
  };
  const stopChecking = repeat(check, intervalMs, clock);
  return {
    track(jobId) {
      const controller = new AbortController();
      running.set(jobId, controller);
      return controller;
    },
    untrack(jobId) {
      running.delete(jobId);
    },
    stop: stopChecking,
  };
}

/** Calls `fn` every `ms` on the clock, or on Node's timers, which then keep no process alive. */
function repeat(fn: () => void, ms: number, clock: Clock | undefined): () => void {
  if (clock) {
    const timer = clock.setInterval(fn, ms);
    return () => clock.clearInterval(timer);
  }
  const timer = setInterval(fn, ms);
  timer.unref();
  return () => clearInterval(timer);
}
