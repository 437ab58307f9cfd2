// The attempt of a job that reports on its row and in its log alone (a scheduled run, a chat turn):
// with no comment to keep up to date, each way it can end is a status, and why when it failed.
import { redact } from "../../log/redact.ts";
import { type Job, type JobStatus, updateJob } from "../../store/jobs.ts";
import type { OpenDeps } from "./deps.ts";
import type { GateResult } from "./gate.ts";
import type { Attempt, JobKind } from "./kind.ts";
import { JobProgress, jobUrl } from "./progress.ts";
import { refusalText } from "./settings.ts";

export type RowStatus = Extract<JobStatus, "succeeded" | "failed" | "cancelled" | "ignored">;

export interface RowAttempt<T = never> extends Attempt {
  /** Ends the job: its row's status, and why when it failed; `detail` goes to the kind's `ended`. */
  end(status: RowStatus, error?: string, detail?: T): Promise<RowStatus>;
}

/** What such a kind says of how its jobs end. */
export interface RowKind<T> {
  /**
   * Someone waits for the job's answer (a chat turn's person): a repository that turned vmpilot
   * off fails the job, saying so, where otherwise it is only ignored.
   */
  awaited: boolean;
  /**
   * What the kind records when the job ends, before its row's status (a chat turn's reply); the
   * error comes redacted.
   */
  ended?(
    deps: Pick<OpenDeps, "db">,
    job: Job,
    status: RowStatus,
    error: string | undefined,
    detail: T | undefined,
  ): Promise<void>;
}

function rowAttempt<T>(deps: OpenDeps, job: Job, kind: RowKind<T>): RowAttempt<T> {
  const progress = new JobProgress({
    db: deps.db.pool,
    jobId: job.id,
    view: {
      jobId: job.id,
      jobUrl: jobUrl(deps.publicUrl, job.id),
      current: "workspace",
      startedAt: Date.now(),
      costUsd: job.costUsd,
    },
    baseCostUsd: job.costUsd,
    logger: deps.logger,
  });
  const end: RowAttempt<T>["end"] = async (status, error, detail) => {
    progress.stop();
    await progress.flush();
    const why = error === undefined ? undefined : redact(error).slice(0, 2000);
    await kind.ended?.(deps, job, status, why, detail);
    await updateJob(deps.db.pool, job.id, { status, ...(why !== undefined && { error: why }) });
    return status;
  };
  return {
    progress,
    end,
    limited: (refusal) =>
      "disabled" in refusal && !kind.awaited ? end("ignored") : end("failed", refusalText(refusal)),
    cancelled: () => end("cancelled"),
    failed: (reason) => end("failed", reason),
    retrying: async () => undefined,
  };
}

function refusedText(job: Job, why: GateResult | { refused: string }): string {
  if ("refused" in why) return why.refused;
  return `${job.requester} may no longer use vmpilot on ${job.repo} (its triggerPolicy or allowedUsers).`;
}

/** How such a kind opens its attempts, and ends a job the gate refused: failed, saying why. */
export function onRow<J extends Job, T = never>(
  kind: RowKind<T>,
): Pick<JobKind<J, RowAttempt<T>>, "open" | "refused"> {
  return {
    open: async (job, { deps }) => rowAttempt(deps, job, kind),
    refused: (job, { deps }, why) =>
      rowAttempt(deps, job, kind).end("failed", refusedText(job, why)),
  };
}
