// The job queue: an entry per job, and jobs sharing a conversation's key run one at a time, in
// order. An attempt that throws is retried with backoff; a job out of retries goes to the
// dead-letter queue, whose worker buries it.
import { randomUUID } from "node:crypto";
import type { Job as BossJob, JobWithMetadata, PgBoss } from "pg-boss";
import { MAX_TIMEOUT_MINUTES } from "../../config/repo-config.ts";
import type { Logger } from "../../log/logger.ts";
import { inSpan, pastSpan, SpanKind, traceContext, traceparent } from "../../log/trace.ts";
import type { Database } from "../../store/database.ts";
import { AttemptFailed, AttemptStarted, Cancelled, Dead } from "../../store/job-event-kinds.ts";
import { appendJobEvent } from "../../store/job-events.ts";
import {
  finishJob,
  markJobCancelled,
  markJobDead,
  recordJobError,
  startJobAttempt,
  unfinishedAttempts,
} from "../../store/job-lifecycle.ts";
import { prepared, type Queryable } from "../../store/sql.ts";
import type { CancelWatch } from "./cancel-watch.ts";
import { notices } from "./notices.ts";

const JOB_QUEUE = "vmpilot-jobs";
const DEAD_QUEUE = "vmpilot-jobs-dead";
const ERROR_LIMIT = 2000;

/** Verbs answered at once; they never wait behind the conversation's running job. */
export const CONTROL_VERBS: ReadonlySet<string> = new Set(["stop", "status", "help"]);

export interface QueuedJob {
  jobId: number;
  /**
   * Jobs sharing a key run one at a time, in order (see conversationKey in store/conversations.ts).
   */
  conversationKey: string;
}

export interface NewQueueEntry extends QueuedJob {
  /**
   * Also queue a notice, which acknowledges the job at once should it find the job waiting behind
   * another of its conversation (acknowledge.ts).
   */
  notice?: boolean;
  /** The span the job's trace goes on from (its delivery's); default the active one. */
  traceparent?: string;
}

/** A queue entry's payload: the job, and where its trace goes on from, when traced. */
interface QueueData extends QueuedJob {
  traceparent?: string;
  /** When it was queued (ms since the epoch): its wait is a span of the trace. */
  queuedAt?: number;
}

export interface RunningJob extends QueuedJob {
  /** 1 on the first run, then one more per retry. */
  attempt: number;
  maxAttempts: number;
  /** Aborted on cancel (from any process), on timeout, and when the worker loses its claim. */
  signal: AbortSignal;
}

/** Throwing fails the attempt: the job is retried with backoff, then dead-lettered. */
export type JobHandler = (job: RunningJob) => Promise<void>;

export interface DeadJob extends QueuedJob {
  error: string | null;
}

/** Called (at least once) when a job ran out of retries, so the user can be told. */
export type DeadHook = (job: DeadJob) => Promise<void>;

/** The job queue's part of QueueOptions (queue.ts), defaults applied where run() needs them. */
export interface JobQueueSettings {
  db: Database;
  logger: Logger;
  cancels: CancelWatch;
  workerId: string;
  concurrency: number;
  retryLimit: number;
  pollingIntervalSeconds: number;
  retryDelay?: number;
  retryBackoff?: boolean;
  retryDelayMax?: number;
  expireInSeconds?: number;
  heartbeatSeconds?: number;
}

let lastIdMicros = 0;

/**
 * A queue entry id that sorts after every one this process made before: microseconds since the
 * epoch up front (as in UUIDv7), random after. pg-boss hands out a key's jobs by created_on, which
 * is the transaction's start time, so jobs enqueued in one transaction tie on it and fall back to
 * comparing ids; random ids would run a conversation's jobs from one batch in any order.
 */
function orderedId(): string {
  lastIdMicros = Math.max(lastIdMicros + 1, Date.now() * 1000);
  const time = lastIdMicros.toString(16).padStart(16, "0");
  const random = randomUUID();
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-${time.slice(12, 16)}-${random.slice(19)}`;
}

function describeError(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.slice(0, ERROR_LIMIT);
}

/** Creates (or updates) the job and dead-letter queues. */
async function createJobQueues(boss: PgBoss, settings: JobQueueSettings): Promise<void> {
  await boss.createQueue(DEAD_QUEUE, { retryLimit: 5, retryDelay: 5, retryBackoff: true });
  const retryBackoff = settings.retryBackoff ?? true;
  const queueSettings = {
    retryLimit: settings.retryLimit,
    retryDelay: settings.retryDelay ?? 10,
    retryBackoff,
    expireInSeconds: settings.expireInSeconds ?? (MAX_TIMEOUT_MINUTES + 30) * 60,
    heartbeatSeconds: settings.heartbeatSeconds ?? 30,
    deadLetter: DEAD_QUEUE,
    // No pg_notify per enqueue: a transaction that notified holds a cluster-wide lock while
    // it commits, which would serialize every intake commit. Workers in this process are woken
    // directly (wake()); those in other processes find the job at their next poll.
    notify: false,
  };
  // pg-boss rejects a backoff cap, even an undefined one, on a queue without backoff.
  const cap = retryBackoff ? { retryDelayMax: settings.retryDelayMax ?? 600 } : {};
  // key_strict_fifo: one active job per key, enforced by a unique index, so workers in other
  // processes cannot both claim a conversation; later jobs of the conversation wait their turn
  // without spending retries.
  await boss.createQueue(JOB_QUEUE, { policy: "key_strict_fifo", ...queueSettings, ...cap });
  // Settings may have changed since the queue was created.
  await boss.updateQueue(JOB_QUEUE, { ...queueSettings, retryDelayMax: null, ...cap });
  // Enqueued inside callers' transactions: fill pg-boss's cache now (see SideQueue's
  // inTransactions); this call goes through it.
  await boss.getBlockedKeys(JOB_QUEUE);
}

async function enqueueJobs(
  boss: PgBoss,
  client: Queryable,
  jobs: NewQueueEntry[],
  sent?: () => void,
): Promise<void> {
  if (jobs.length === 0) return;
  const noticeEntries = jobs.flatMap((job) =>
    job.notice ? [{ id: orderedId(), data: { jobId: job.jobId } }] : [],
  );
  let unsent = noticeEntries.length > 0 ? 2 : 1;
  const executeSql = (text: string, values?: unknown[]) => {
    const result = client.query(prepared(client, text, values ?? []));
    if (--unsent === 0) sent?.();
    return result;
  };
  const db = { executeSql };
  const [ids] = await Promise.all([
    boss.insert(
      JOB_QUEUE,
      jobs.map(({ jobId, conversationKey, traceparent: parent = traceparent() }) => ({
        id: orderedId(),
        data: {
          jobId,
          conversationKey,
          ...(parent && { traceparent: parent, queuedAt: Date.now() }),
        } satisfies QueueData,
        singletonKey: conversationKey,
      })),
      { db, returnId: true },
    ),
    noticeEntries.length > 0 ? boss.insert(notices.name, noticeEntries, { db }) : undefined,
  ]);
  // The insert skips conflicting rows silently; a job the queue does not hold would never run.
  if (ids?.length !== jobs.length) {
    throw new Error(`queue took ${ids?.length ?? 0} of ${jobs.length} jobs`);
  }
}

export function createJobQueue(boss: PgBoss, settings: JobQueueSettings) {
  const { db, logger, cancels, workerId, retryLimit, pollingIntervalSeconds } = settings;
  /** pg-boss ids of the jobs this process's handlers are running. */
  const running = new Set<string>();

  /** One attempt, a span of the trace its delivery began (a new trace when none was stored). */
  function run(job: BossJob<QueueData>, handler: JobHandler): Promise<void> {
    const { jobId, traceparent, queuedAt } = job.data;
    const attempt = job.retryCount + 1;
    const parent = traceContext(traceparent);
    const attributes = { "vmpilot.job.id": jobId, "vmpilot.job.attempt": attempt };
    if (attempt === 1 && typeof queuedAt === "number") {
      pastSpan("queue wait", parent, queuedAt, attributes);
    }
    const options = { kind: SpanKind.CONSUMER, parent, attributes };
    return inSpan("job", options, () => runAttempt(job, attempt, handler));
  }

  async function runAttempt(
    job: BossJob<QueueData>,
    attempt: number,
    handler: JobHandler,
  ): Promise<void> {
    const { jobId, conversationKey } = job.data;
    if (!(await startJobAttempt(db.pool, jobId, attempt, { workerId, queueJobId: job.id }))) {
      // Cancelled while it waited: nothing to run, and nothing to retry.
      await markJobCancelled(db.pool, jobId);
      return;
    }
    await appendJobEvent(db.pool, jobId, AttemptStarted, { attempt });
    const cancel = cancels.track(jobId);
    const signal = AbortSignal.any([job.signal, cancel.signal]);
    try {
      await handler({ jobId, conversationKey, attempt, maxAttempts: retryLimit + 1, signal });
    } catch (error) {
      if (!cancel.signal.aborted) {
        const message = describeError(error);
        logger.warn({ jobId, attempt, err: error }, "job attempt failed");
        await recordJobError(db.pool, jobId, message);
        await appendJobEvent(db.pool, jobId, AttemptFailed, { attempt, error: message });
        throw error;
      }
    } finally {
      cancels.untrack(jobId);
    }
    if (cancel.signal.aborted) {
      await markJobCancelled(db.pool, jobId);
      await appendJobEvent(db.pool, jobId, Cancelled, {});
    } else {
      await finishJob(db.pool, jobId);
    }
  }

  async function bury(dead: JobWithMetadata<QueuedJob>, onDead?: DeadHook): Promise<void> {
    const { jobId, conversationKey } = dead.data;
    // A failed job keeps holding its conversation's key; deleting it lets the conversation's next
    // job run.
    if (dead.sourceId) await boss.deleteJob(JOB_QUEUE, dead.sourceId);
    const output = dead.sourceOutput as { message?: unknown } | null;
    const error = typeof output?.message === "string" ? describeError(output.message) : null;
    if (!(await markJobDead(db.pool, jobId, error))) return;
    await appendJobEvent(db.pool, jobId, Dead, { error });
    logger.error({ jobId, error }, "job ran out of retries");
    await onDead?.({ jobId, conversationKey, error });
  }

  /** The failures were the worker's, not the jobs': their retries need not wait out the delay. */
  async function retryNow(ids: string[]): Promise<void> {
    for (const id of ids) {
      await boss.update({ name: JOB_QUEUE, options: { id, startAfter: new Date() } });
    }
  }

  /**
   * Our identity's previous instance died running these (we hold its identity now): fail them so
   * they are retried without waiting for their heartbeats to lapse. The retry count fences each
   * fail to the attempt that died, should another worker have taken the job up meanwhile.
   */
  async function recoverOrphans(): Promise<void> {
    const orphans = await unfinishedAttempts(db.pool, workerId);
    if (orphans.length === 0) return;
    const jobs = orphans.map((o) => ({ id: o.queueJobId, retryCount: o.attempt - 1 }));
    await boss.fail(JOB_QUEUE, jobs, { message: "the worker running it restarted" });
    await retryNow(jobs.map((job) => job.id));
    logger.info({ count: orphans.length }, "handed the previous instance's jobs back to the queue");
  }

  return {
    create: () => createJobQueues(boss, settings),
    enqueueJobs: (client: Queryable, jobs: NewQueueEntry[], sent?: () => void) =>
      enqueueJobs(boss, client, jobs, sent),

    /** Hands the previous instance's jobs back, then starts the slots; resolves to their ids. */
    async work(handler: JobHandler): Promise<string[]> {
      await recoverOrphans();
      // One pg-boss worker per slot rather than one with localConcurrency: wake() can reach only
      // the workers whose ids it knows, and an idle slot must not sleep out its poll while another
      // is busy.
      const ids: string[] = [];
      for (let slot = 0; slot < settings.concurrency; slot++) {
        ids.push(
          await boss.work<QueueData>(JOB_QUEUE, { pollingIntervalSeconds }, async ([job]) => {
            if (!job) return;
            running.add(job.id);
            try {
              await run(job, handler);
            } finally {
              running.delete(job.id);
            }
          }),
        );
      }
      return ids;
    },

    async workDead(onDead?: DeadHook): Promise<void> {
      await boss.work(
        DEAD_QUEUE,
        { includeMetadata: true, pollingIntervalSeconds },
        async ([dead]: JobWithMetadata<QueuedJob>[]) => {
          if (dead) await bury(dead, onDead);
        },
      );
    },

    /** After stop: the jobs still running were failed back to the queue; retry them now. */
    async handBack(): Promise<void> {
      if (running.size > 0) await retryNow([...running]);
    },
  };
}
