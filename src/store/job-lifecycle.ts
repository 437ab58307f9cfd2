import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { bigint, queryRows, row } from "./stored-value.ts";

// The queue's transitions of a job row. finished_at marks that the queue is done with a job: every
// transition here checks it, so whichever of worker and canceller gets the row lock first wins.

export type CancelOutcome =
  /** The job had not started; it will never run. */
  | "cancelled"
  /** The job is running; its handler's signal is aborted within the next check. */
  | "requested"
  /** Nothing to cancel: no such job, or it already ended. */
  | "finished";

export async function requestJobCancel(db: Queryable, jobId: number): Promise<CancelOutcome> {
  const [job] = await queryRows(
    db,
    `UPDATE jobs SET
       cancel_requested_at = coalesce(cancel_requested_at, now()),
       status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,
       finished_at = CASE WHEN status = 'queued' THEN now() END,
       updated_at = now()
     WHERE id = $1 AND finished_at IS NULL
     RETURNING status`,
    [jobId],
    z.object({ status: z.string() }),
    `the cancelled job ${jobId}`,
  );
  if (!job) return "finished";
  return job.status === "cancelled" ? "cancelled" : "requested";
}

/** Who runs an attempt: the worker instance's identity and the queue entry it took. */
export interface AttemptClaim {
  workerId: string;
  queueJobId: string;
}

/** Marks an attempt started; false when the job was cancelled or ended before it got here. */
export async function startJobAttempt(
  db: Queryable,
  jobId: number,
  attempt: number,
  claim?: AttemptClaim,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE jobs SET
       status = CASE WHEN status = 'queued' THEN 'running' ELSE status END,
       started_at = coalesce(started_at, now()),
       attempts = $2,
       worker_id = $3,
       queue_job_id = $4,
       updated_at = now()
     WHERE id = $1 AND finished_at IS NULL AND cancel_requested_at IS NULL`,
    [jobId, attempt, claim?.workerId ?? null, claim?.queueJobId ?? null],
  );
  return rowCount === 1;
}

const Orphan = row({ queue_job_id: z.string(), attempt: z.coerce.number().int().min(1) });

/** The attempts a worker instance started and never ended: after its restart, they are dead. */
export async function unfinishedAttempts(
  db: Queryable,
  workerId: string,
): Promise<z.output<typeof Orphan>[]> {
  return queryRows(
    db,
    `SELECT queue_job_id, attempts AS attempt FROM jobs
     WHERE worker_id = $1 AND finished_at IS NULL AND queue_job_id IS NOT NULL`,
    [workerId],
    Orphan,
    `the unfinished attempts of worker ${workerId}`,
  );
}

/** The handler returned: a job it left queued or running has succeeded. */
export async function finishJob(db: Queryable, jobId: number): Promise<void> {
  await db.query(
    `UPDATE jobs SET
       status = CASE WHEN status IN ('queued', 'running') THEN 'succeeded' ELSE status END,
       finished_at = coalesce(finished_at, now()),
       updated_at = now()
     WHERE id = $1`,
    [jobId],
  );
}

export async function markJobCancelled(db: Queryable, jobId: number): Promise<void> {
  await db.query(
    `UPDATE jobs SET status = 'cancelled', finished_at = now(), updated_at = now()
     WHERE id = $1 AND finished_at IS NULL`,
    [jobId],
  );
}

/** Records a failed attempt's reason; the queue decides whether another attempt follows. */
export async function recordJobError(db: Queryable, jobId: number, error: string): Promise<void> {
  await db.query("UPDATE jobs SET error = $2, updated_at = now() WHERE id = $1", [jobId, error]);
}

/**
 * Retries ran out. True when the job is (now) dead, so the user should be told; false when it had
 * already ended some other way, e.g. cancelled.
 */
export async function markJobDead(
  db: Queryable,
  jobId: number,
  error: string | null,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE jobs SET
       status = 'dead',
       error = coalesce($2, error),
       finished_at = coalesce(finished_at, now()),
       updated_at = now()
     WHERE id = $1 AND (finished_at IS NULL OR status = 'dead')`,
    [jobId, error],
  );
  return rowCount === 1;
}

/** Which of these running jobs someone asked to cancel. */
export async function cancelRequested(db: Queryable, jobIds: number[]): Promise<number[]> {
  const rows = await queryRows(
    db,
    "SELECT id FROM jobs WHERE id = ANY($1::bigint[]) AND cancel_requested_at IS NOT NULL",
    [jobIds],
    z.object({ id: bigint }),
    "jobs asked to cancel",
  );
  return rows.map((r) => r.id);
}

/** True while the attempt is the job's current one and the job has not ended. */
export async function attemptRunning(db: Queryable, jobId: number, attempt: number) {
  const { rowCount } = await db.query(
    `SELECT 1 FROM jobs
     WHERE id = $1 AND attempts = $2 AND status = 'running' AND finished_at IS NULL`,
    [jobId, attempt],
  );
  return rowCount === 1;
}

const noticeRow = z.object({ ahead: z.coerce.number().int(), waiting: z.coerce.number().int() });

/**
 * Claims the first answer to a job that waits behind unfinished jobs of its conversation (`ahead`:
 * the first of them; `waiting`: how many more). Undefined when nothing is ahead (the job starts,
 * and answers, at once), or the job started, ended or was claimed already. The job's own start
 * takes the same row, so exactly one of the two answers first.
 */
export async function claimNotice(
  db: Queryable,
  jobId: number,
  controlVerbs: readonly string[],
): Promise<z.infer<typeof noticeRow> | undefined> {
  const { rows } = await db.query(
    `WITH ahead AS (
       SELECT a.id FROM jobs a JOIN jobs j ON a.conversation_id = j.conversation_id
        WHERE j.id = $1 AND a.id < j.id AND a.finished_at IS NULL
          AND coalesce(a.command, '') <> ALL ($2::text[]))
     UPDATE jobs SET noticed_at = now(), updated_at = now()
      WHERE id = $1 AND status = 'queued' AND started_at IS NULL AND noticed_at IS NULL
        AND finished_at IS NULL AND EXISTS (SELECT 1 FROM ahead)
     RETURNING (SELECT min(id) FROM ahead) AS ahead, (SELECT count(*) - 1 FROM ahead) AS waiting`,
    [jobId, controlVerbs],
  );
  return rows[0] === undefined ? undefined : noticeRow.parse(rows[0]);
}
