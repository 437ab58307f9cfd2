import { randomUUID } from "node:crypto";
import { type Job as BossJob, type Clock, type JobWithMetadata, PgBoss } from "pg-boss";
import { z } from "zod";
import { MAX_TIMEOUT_MINUTES } from "../config/repo-config.ts";
import { type Logger, silentLogger } from "../log/logger.ts";
import type { Database } from "../store/database.ts";
import { appendJobEvent } from "../store/job-events.ts";
import {
  type CancelOutcome,
  finishJob,
  markJobCancelled,
  markJobDead,
  recordJobError,
  requestJobCancel,
  startJobAttempt,
  unfinishedAttempts,
} from "../store/job-lifecycle.ts";
import { prepared, type Queryable } from "../store/sql.ts";
import { watchCancellations } from "./cancel-watch.ts";

const JOB_QUEUE = "vmpilot-jobs";
const DEAD_QUEUE = "vmpilot-jobs-dead";
// Acknowledgements of jobs that wait behind their chat's running job: short, never held by a key.
const NOTICE_QUEUE = "vmpilot-notices";
// "vmpilot config" check runs: light, never held by a key.
const CONFIG_CHECK_QUEUE = "vmpilot-config-checks";
// Checks whether vmpilot's pull request is ready for review (ready.ts): short, never held by a key.
const READY_QUEUE = "vmpilot-ready";
// The repositories' automations (automations.ts): the fires of their schedules, which pg-boss's
// scheduler sends once per slot across all processes, and re-reads of their files. Short, never
// held by a key.
const AUTOMATION_QUEUE = "vmpilot-automations";
const ERROR_LIMIT = 2000;

interface QueuedJob {
  jobId: number;
  /** Jobs sharing a key run one at a time, in order (see chatKey in store/chats.ts). */
  chatKey: string;
}

interface NewQueueEntry extends QueuedJob {
  /**
   * Also queue a notice, which acknowledges the job at once should it find the job waiting behind
   * another of its chat (acknowledge.ts).
   */
  notice?: boolean;
}

const NoticeData = z.object({ jobId: z.number().int() });

const ConfigCheckData = z.object({
  installationId: z.number().int(),
  repositoryId: z.number().int(),
  owner: z.string(),
  repo: z.string(),
  headSha: z.string(),
  /**
   * What tells whether the head changes `.github/vmpilot.yml`: the pull request's files, or the
   * push's commits (listed: they name the file; not listed: too many commits to tell).
   */
  changes: z.discriminatedUnion("kind", [
    z.object({ kind: z.literal("pull_request"), number: z.number().int() }),
    z.object({ kind: z.literal("push"), listed: z.boolean() }),
  ]),
});
export type ConfigCheckRequest = z.infer<typeof ConfigCheckData>;

const ReadyCheckData = z.object({
  chatId: z.number().int(),
  /** The head vmpilot pushed; a later push makes the check moot. */
  sha: z.string(),
  /** Without any check suite on the head, the pull request is ready once this check runs. */
  grace: z.boolean(),
});
export type ReadyCheck = z.infer<typeof ReadyCheckData>;

const AutomationData = z.discriminatedUnion("kind", [
  /** A schedule's slot came: run the automation, if the file still says so. */
  z.object({
    kind: z.literal("schedule"),
    repositoryId: z.number().int(),
    name: z.string(),
    cron: z.string(),
  }),
  /** The file may have changed: read it and set the schedules (of one repository, or of all). */
  z.object({
    kind: z.literal("sync"),
    installationId: z.number().int(),
    repositoryId: z.number().int().optional(),
  }),
]);
export type AutomationMessage = z.infer<typeof AutomationData>;
export type AutomationSync = Extract<AutomationMessage, { kind: "sync" }>;

/** One of a repository's scheduled automations. */
export interface ScheduledAutomation {
  name: string;
  /** Five-field cron, UTC. */
  cron: string;
}

/** Schedules are keyed by repository and automation: `<repositoryId>/<name>`. */
const scheduleKey = (repositoryId: number, name: string) => `${repositoryId}/${name}`;

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

interface WorkHooks {
  /** Called (at least once) when a job ran out of retries, so the user can be told. */
  onDead?: (job: DeadJob) => Promise<void>;
  /** Runs the notices of this process's share; a throw retries the notice, not the job. */
  onNotice?: (jobId: number, signal: AbortSignal) => Promise<void>;
  /** Runs the config checks of this process's share; a throw retries the check. */
  onConfigCheck?: (check: ConfigCheckRequest, signal: AbortSignal) => Promise<void>;
  /** Runs the ready-for-review checks; a throw retries the check. */
  onReady?: (check: ReadyCheck, signal: AbortSignal) => Promise<void>;
  /**
   * Runs the automation messages; `id` is the message's own, the same on a retry. A throw retries
   * the message.
   */
  onAutomation?: (message: AutomationMessage, id: string, signal: AbortSignal) => Promise<void>;
}

export interface QueueOptions {
  /** Jobs this process runs at once. Default 2. */
  concurrency?: number;
  /** Retries after the first attempt. Default 2. */
  retryLimit?: number;
  /** Whole seconds before a retry; doubled per retry with backoff. Default 10. */
  retryDelay?: number;
  retryBackoff?: boolean;
  /** Cap on the backoff delay, seconds. Default 600. */
  retryDelayMax?: number;
  /** The longest one attempt may run, seconds. Default: the longest job timeout plus setup time. */
  expireInSeconds?: number;
  /** A worker that stops heartbeating this long (seconds, >= 10) is presumed dead. Default 30. */
  heartbeatSeconds?: number;
  /** How often an idle worker looks for jobs, seconds (>= 0.5). Default 1. */
  pollingIntervalSeconds?: number;
  /** How often dead workers' jobs are reclaimed, seconds. Default 30. */
  superviseIntervalSeconds?: number;
  /**
   * On stop, how long running jobs may finish, seconds; those still running then are failed back
   * to the queue (retried after retryDelay, not after their expiry) and their handlers aborted.
   * Default 30.
   */
  drainSeconds?: number;
  /** How often running jobs are checked for cancel requests, ms. Default 500. */
  cancelCheckMs?: number;
  /**
   * This worker's identity, kept across restarts (worker-identity.ts): work() hands the jobs its
   * previous instance was running back to the queue at once. Default: a new one, recovering nothing.
   */
  workerId?: string;
  /** pg-boss's clock, timers and the database's "now" alike; tests pass a TestClock. */
  clock?: Clock;
  logger?: Logger;
}

export interface Queue {
  /** Connects and creates the queues; needed before enqueueing too. */
  start(): Promise<void>;
  /** Stops fetching, lets running handlers finish for drainSeconds, then hands them back and aborts them. */
  stop(): Promise<void>;
  /**
   * Enqueues inside the caller's transaction (pass its client), so the job row and the queue entry
   * commit or roll back together.
   */
  enqueueJob(db: Queryable, job: QueuedJob): Promise<void>;
  /**
   * enqueueJob for many jobs in one statement (and their notices in another); jobs sharing a key
   * run in the order given. sent is called once the statements are on their way, so the caller can
   * send COMMIT behind them.
   */
  enqueueJobs(db: Queryable, jobs: NewQueueEntry[], sent?: () => void): Promise<void>;
  /** Queues a config check inside the caller's transaction, like enqueueJob. */
  enqueueConfigCheck(db: Queryable, check: ConfigCheckRequest): Promise<void>;
  /**
   * Queues a ready-for-review check, inside the caller's transaction when given one, to run no
   * sooner than `delaySeconds` from now.
   */
  enqueueReady(
    check: ReadyCheck,
    options?: { db?: Queryable; delaySeconds?: number },
  ): Promise<void>;
  /** Queues a re-read of automations after their file changed. */
  enqueueAutomationSync(sync: Omit<AutomationSync, "kind">): Promise<void>;
  /**
   * Makes a repository's scheduled automations exactly `wanted`, across all processes: each is a
   * pg-boss schedule whose slots pg-boss sends once, whichever processes check them.
   */
  setSchedules(repositoryId: number, wanted: readonly ScheduledAutomation[]): Promise<void>;
  /** The repositories that have scheduled automations. */
  scheduledRepositories(): Promise<number[]>;
  /** Starts this process's workers. */
  work(handler: JobHandler, hooks?: WorkHooks): Promise<void>;
  /** Cancels a queued job, or aborts a running one wherever it runs. */
  cancel(jobId: number): Promise<CancelOutcome>;
  /** Makes this process's workers look for jobs now rather than at their next poll (call after commit). */
  wake(): void;
  /**
   * Runs task now and then every `seconds`, in one process at a time across all that share the
   * database: each run is a job on the queue `name`, which holds one waiting or running job at
   * most (pg-boss's exclusive policy), and the later runs take one throttle slot of `seconds`
   * each, so however many processes ask, one runs per period. The signal aborts on stop.
   * Resolves, once the first run is queued, to the stop of the asking.
   */
  every(
    name: string,
    seconds: number,
    task: (signal: AbortSignal) => Promise<void>,
  ): Promise<() => void>;
  healthy(): Promise<boolean>;
}

let lastIdMicros = 0;

/**
 * A queue entry id that sorts after every one this process made before: microseconds since the
 * epoch up front (as in UUIDv7), random after. pg-boss hands out a key's jobs by created_on, which
 * is the transaction's start time, so jobs enqueued in one transaction tie on it and fall back to
 * comparing ids; random ids would run a chat's jobs from one batch in any order.
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

export function createQueue(db: Database, options: QueueOptions = {}): Queue {
  const logger = options.logger ?? silentLogger;
  const concurrency = options.concurrency ?? 2;
  const retryLimit = options.retryLimit ?? 2;
  const pollingIntervalSeconds = options.pollingIntervalSeconds ?? 1;
  const superviseIntervalSeconds = options.superviseIntervalSeconds ?? 30;
  const boss = new PgBoss({
    connectionString: db.url,
    application_name: "vmpilot-queue",
    // One connection per handler's settle, plus fetches, the notice and dead-letter workers and
    // maintenance.
    max: concurrency + 5,
    superviseIntervalSeconds,
    monitorIntervalSeconds: superviseIntervalSeconds,
    ...(options.clock && { clock: options.clock }),
  });
  boss.on("error", (error) => logger.error({ err: error }, "queue error"));
  const cancels = watchCancellations(db.pool, options.cancelCheckMs ?? 500, logger);
  let started = false;
  let stopped = false;
  const workerIds: string[] = [];
  /** pg-boss ids of the jobs this process's handlers are running. */
  const running = new Set<string>();
  const workerId = options.workerId ?? randomUUID();

  async function run(job: BossJob<QueuedJob>, handler: JobHandler): Promise<void> {
    const { jobId, chatKey } = job.data;
    const attempt = job.retryCount + 1;
    if (!(await startJobAttempt(db.pool, jobId, attempt, { workerId, queueJobId: job.id }))) {
      // Cancelled while it waited: nothing to run, and nothing to retry.
      await markJobCancelled(db.pool, jobId);
      return;
    }
    await appendJobEvent(db.pool, jobId, "attempt_started", { attempt });
    const cancel = cancels.track(jobId);
    const signal = AbortSignal.any([job.signal, cancel.signal]);
    try {
      await handler({ jobId, chatKey, attempt, maxAttempts: retryLimit + 1, signal });
    } catch (error) {
      if (!cancel.signal.aborted) {
        const message = describeError(error);
        logger.warn({ jobId, attempt, err: error }, "job attempt failed");
        await recordJobError(db.pool, jobId, message);
        await appendJobEvent(db.pool, jobId, "attempt_failed", { attempt, error: message });
        throw error;
      }
    } finally {
      cancels.untrack(jobId);
    }
    if (cancel.signal.aborted) {
      await markJobCancelled(db.pool, jobId);
      await appendJobEvent(db.pool, jobId, "cancelled", {});
    } else {
      await finishJob(db.pool, jobId);
    }
  }

  async function bury(dead: JobWithMetadata<QueuedJob>, hooks: WorkHooks): Promise<void> {
    const { jobId, chatKey } = dead.data;
    // A failed job keeps holding its chat's key; deleting it lets the chat's next job run.
    if (dead.sourceId) await boss.deleteJob(JOB_QUEUE, dead.sourceId);
    const output = dead.sourceOutput as { message?: unknown } | null;
    const error = typeof output?.message === "string" ? describeError(output.message) : null;
    if (!(await markJobDead(db.pool, jobId, error))) return;
    await appendJobEvent(db.pool, jobId, "dead", { error });
    logger.error({ jobId, error }, "job ran out of retries");
    await hooks.onDead?.({ jobId, chatKey, error });
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

  async function enqueueJobs(
    client: Queryable,
    jobs: NewQueueEntry[],
    sent?: () => void,
  ): Promise<void> {
    if (jobs.length === 0) return;
    const notices = jobs.flatMap((job) =>
      job.notice ? [{ id: orderedId(), data: { jobId: job.jobId } }] : [],
    );
    let unsent = notices.length > 0 ? 2 : 1;
    const executeSql = (text: string, values?: unknown[]) => {
      const result = client.query(prepared(client, text, values ?? []));
      if (--unsent === 0) sent?.();
      return result;
    };
    const db = { executeSql };
    const [ids] = await Promise.all([
      boss.insert(
        JOB_QUEUE,
        jobs.map(({ jobId, chatKey }) => ({
          id: orderedId(),
          data: { jobId, chatKey },
          singletonKey: chatKey,
        })),
        { db, returnId: true },
      ),
      notices.length > 0 ? boss.insert(NOTICE_QUEUE, notices, { db }) : undefined,
    ]);
    // The insert skips conflicting rows silently; a job the queue does not hold would never run.
    if (ids?.length !== jobs.length) {
      throw new Error(`queue took ${ids?.length ?? 0} of ${jobs.length} jobs`);
    }
  }

  return {
    async start() {
      await boss.start();
      await boss.createQueue(DEAD_QUEUE, { retryLimit: 5, retryDelay: 5, retryBackoff: true });
      await boss.createQueue(NOTICE_QUEUE, { retryLimit: 2, retryDelay: 2, notify: false });
      await boss.createQueue(CONFIG_CHECK_QUEUE, {
        retryLimit: 3,
        retryDelay: 5,
        retryBackoff: true,
        notify: false,
      });
      await boss.createQueue(READY_QUEUE, {
        retryLimit: 3,
        retryDelay: 10,
        retryBackoff: true,
        notify: false,
      });
      await boss.createQueue(AUTOMATION_QUEUE, {
        retryLimit: 3,
        retryDelay: 10,
        retryBackoff: true,
        notify: false,
      });
      const retryBackoff = options.retryBackoff ?? true;
      const settings = {
        retryLimit,
        retryDelay: options.retryDelay ?? 10,
        retryBackoff,
        expireInSeconds: options.expireInSeconds ?? (MAX_TIMEOUT_MINUTES + 30) * 60,
        heartbeatSeconds: options.heartbeatSeconds ?? 30,
        deadLetter: DEAD_QUEUE,
        // No pg_notify per enqueue: a transaction that notified holds a cluster-wide lock while
        // it commits, which would serialize every intake commit. Workers in this process are woken
        // directly (wake()); those in other processes find the job at their next poll.
        notify: false,
      };
      // pg-boss rejects a backoff cap, even an undefined one, on a queue without backoff.
      const cap = retryBackoff ? { retryDelayMax: options.retryDelayMax ?? 600 } : {};
      // key_strict_fifo: one active job per key, enforced by a unique index, so workers in other
      // processes cannot both claim a chat; later jobs of the chat wait their turn without
      // spending retries.
      await boss.createQueue(JOB_QUEUE, { policy: "key_strict_fifo", ...settings, ...cap });
      // Settings may have changed since the queue was created.
      await boss.updateQueue(JOB_QUEUE, { ...settings, retryDelayMax: null, ...cap });
      // insert() looks the queue up in pg-boss's cache, on pg-boss's own pool when it is not cached.
      // Inside a caller's transaction on the embedded database that lookup would wait for the
      // transaction it is part of, so fill the cache now (this call goes through it).
      await boss.getBlockedKeys(JOB_QUEUE);
      await boss.insert(NOTICE_QUEUE, []);
      await boss.insert(CONFIG_CHECK_QUEUE, []);
      await boss.insert(READY_QUEUE, []);
      started = true;
    },

    async stop() {
      stopped = true;
      // Draining jobs can still be cancelled; the watch stops once they are over.
      // pg-boss fails the jobs still running at the deadline (and aborts their handlers); the pool
      // stays open for their retries to be brought forward.
      const timeout = (options.drainSeconds ?? 30) * 1000;
      await boss.stop({ graceful: true, timeout, close: false });
      cancels.stop();
      if (started && running.size > 0) await retryNow([...running]);
      const pool = boss.getDb();
      if ("close" in pool && typeof pool.close === "function") await pool.close();
    },

    enqueueJob(client, job) {
      return enqueueJobs(client, [job]);
    },

    enqueueJobs,

    async enqueueConfigCheck(client, check) {
      const executeSql = (text: string, values?: unknown[]) => client.query(text, values);
      await boss.insert(CONFIG_CHECK_QUEUE, [{ data: check }], { db: { executeSql } });
    },

    async enqueueReady(check, { db, delaySeconds = 0 } = {}) {
      const job = { data: check, startAfter: new Date(Date.now() + delaySeconds * 1000) };
      const inTransaction = db && {
        executeSql: (text: string, values?: unknown[]) =>
          db.query(prepared(db, text, values ?? [])),
      };
      await boss.insert(READY_QUEUE, [job], inTransaction ? { db: inTransaction } : {});
    },

    async enqueueAutomationSync(sync) {
      await boss.send(AUTOMATION_QUEUE, { kind: "sync", ...sync });
    },

    async setSchedules(repositoryId, wanted) {
      const prefix = scheduleKey(repositoryId, "");
      const existing = (await boss.getSchedules(AUTOMATION_QUEUE)).filter((schedule) =>
        schedule.key.startsWith(prefix),
      );
      for (const schedule of existing) {
        if (!wanted.some((w) => scheduleKey(repositoryId, w.name) === schedule.key)) {
          await boss.unschedule(AUTOMATION_QUEUE, schedule.key);
        }
      }
      for (const { name, cron } of wanted) {
        const key = scheduleKey(repositoryId, name);
        if (existing.some((schedule) => schedule.key === key && schedule.cron === cron)) continue;
        // An upsert: a changed expression replaces the old one under the same key.
        const data: AutomationMessage = { kind: "schedule", repositoryId, name, cron };
        await boss.schedule(AUTOMATION_QUEUE, cron, data, { tz: "UTC", key });
      }
    },

    async scheduledRepositories() {
      const schedules = await boss.getSchedules(AUTOMATION_QUEUE);
      const ids = schedules.map((schedule) => Number(schedule.key.split("/")[0]));
      return [...new Set(ids.filter(Number.isSafeInteger))];
    },

    async work(handler, hooks = {}) {
      await recoverOrphans();
      // One pg-boss worker per slot rather than one with localConcurrency: wake() can reach only
      // the workers whose ids it knows, and an idle slot must not sleep out its poll while another
      // is busy.
      for (let slot = 0; slot < concurrency; slot++) {
        workerIds.push(
          await boss.work<QueuedJob>(JOB_QUEUE, { pollingIntervalSeconds }, async ([job]) => {
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
      const { onNotice, onReady } = hooks;
      if (onReady) {
        workerIds.push(
          await boss.work(READY_QUEUE, { pollingIntervalSeconds }, async ([check]) => {
            if (check) await onReady(ReadyCheckData.parse(check.data), check.signal);
          }),
        );
      }
      if (onNotice) {
        workerIds.push(
          await boss.work(NOTICE_QUEUE, { pollingIntervalSeconds }, async ([notice]) => {
            if (notice) await onNotice(NoticeData.parse(notice.data).jobId, notice.signal);
          }),
        );
      }
      const { onAutomation } = hooks;
      if (onAutomation) {
        workerIds.push(
          await boss.work(AUTOMATION_QUEUE, { pollingIntervalSeconds }, async ([message]) => {
            if (message) {
              await onAutomation(AutomationData.parse(message.data), message.id, message.signal);
            }
          }),
        );
      }
      const { onConfigCheck } = hooks;
      if (onConfigCheck) {
        workerIds.push(
          await boss.work(CONFIG_CHECK_QUEUE, { pollingIntervalSeconds }, async ([check]) => {
            if (check) await onConfigCheck(ConfigCheckData.parse(check.data), check.signal);
          }),
        );
      }
      await boss.work(
        DEAD_QUEUE,
        { includeMetadata: true, pollingIntervalSeconds },
        async ([dead]: JobWithMetadata<QueuedJob>[]) => {
          if (dead) await bury(dead, hooks);
        },
      );
    },

    cancel(jobId) {
      return requestJobCancel(db.pool, jobId);
    },

    wake() {
      for (const id of workerIds) boss.notifyWorker(id);
    },

    async every(name, seconds, task) {
      await boss.createQueue(name, {
        policy: "exclusive",
        retryLimit: 0,
        heartbeatSeconds: 30,
        expireInSeconds: Math.max(seconds, 3600),
      });
      // The asking process wakes its own worker; polling only backs that up.
      const worker = await boss.work(name, { pollingIntervalSeconds: 60 }, async ([job]) => {
        if (job) await task(job.signal);
      });
      const ask = async (throttle: { singletonSeconds?: number }) => {
        try {
          if (await boss.send(name, {}, throttle)) boss.notifyWorker(worker);
        } catch (error) {
          logger.warn({ err: error, queue: name }, "could not queue a periodic task");
        }
      };
      await ask({});
      const timer = setInterval(() => void ask({ singletonSeconds: seconds }), seconds * 1000);
      timer.unref();
      return () => clearInterval(timer);
    },

    async healthy() {
      if (!started || stopped) return false;
      try {
        await boss.getDb().executeSql("SELECT 1");
        return true;
      } catch {
        return false;
      }
    },
  };
}
