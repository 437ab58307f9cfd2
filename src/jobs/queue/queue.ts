// The queues of jobs and of the small tasks around them, on pg-boss over the app's database: the
// job queue (queue/job-queue.ts), the side queues (notices, config checks, ready checks,
// automations) and periodic tasks shared by all processes.
import { randomUUID } from "node:crypto";
import { type Clock, PgBoss } from "pg-boss";
import { type Logger, silentLogger } from "../../log/logger.ts";
import type { Database } from "../../store/database.ts";
import { type CancelOutcome, requestJobCancel } from "../../store/job-lifecycle.ts";
import type { Queryable } from "../../store/sql.ts";
import {
  type AutomationHook,
  type AutomationSync,
  automationQueue,
  enqueueAutomationSync,
  type ScheduledAutomation,
  scheduledRepositories,
  setSchedules,
} from "./automations.ts";
import { watchCancellations } from "./cancel-watch.ts";
import {
  type ConfigCheckHook,
  type ConfigCheckRequest,
  configChecks,
  enqueueConfigCheck,
} from "./config-checks.ts";
import {
  createJobQueue,
  type DeadHook,
  type JobHandler,
  type NewQueueEntry,
  type QueuedJob,
} from "./job-queue.ts";
import { type NoticeHook, notices } from "./notices.ts";
import { every } from "./periodic.ts";
import { enqueueReady, type ReadyCheck, type ReadyHook, readyChecks } from "./ready-checks.ts";
import { createSideQueues, warmSideQueues, workSideQueue } from "./side-queue.ts";

export type {
  AutomationMessage,
  AutomationSync,
  ScheduledAutomation,
} from "./automations.ts";
export type { ConfigCheckRequest } from "./config-checks.ts";
export type { DeadJob, JobHandler, RunningJob } from "./job-queue.ts";
export type { ReadyCheck } from "./ready-checks.ts";

const SIDE_QUEUES = [notices, configChecks, readyChecks, automationQueue];

interface WorkHooks {
  onDead?: DeadHook;
  onNotice?: NoticeHook;
  onConfigCheck?: ConfigCheckHook;
  onReady?: ReadyHook;
  onAutomation?: AutomationHook;
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

function newBoss(db: Database, concurrency: number, options: QueueOptions): PgBoss {
  const superviseIntervalSeconds = options.superviseIntervalSeconds ?? 30;
  return new PgBoss({
    connectionString: db.url,
    application_name: "vmpilot-queue",
    // One connection per handler's settle, plus fetches, the notice and dead-letter workers and
    // maintenance.
    max: concurrency + 5,
    superviseIntervalSeconds,
    monitorIntervalSeconds: superviseIntervalSeconds,
    ...(options.clock && { clock: options.clock }),
  });
}

export function createQueue(db: Database, options: QueueOptions = {}): Queue {
  const logger = options.logger ?? silentLogger;
  const concurrency = options.concurrency ?? 2;
  const pollingIntervalSeconds = options.pollingIntervalSeconds ?? 1;
  const boss = newBoss(db, concurrency, options);
  boss.on("error", (error) => logger.error({ err: error }, "queue error"));
  const cancels = watchCancellations(db.pool, options.cancelCheckMs ?? 500, logger, options.clock);
  const jobs = createJobQueue(boss, {
    db,
    logger,
    cancels,
    workerId: options.workerId ?? randomUUID(),
    concurrency,
    retryLimit: options.retryLimit ?? 2,
    retryDelay: options.retryDelay,
    retryBackoff: options.retryBackoff,
    retryDelayMax: options.retryDelayMax,
    expireInSeconds: options.expireInSeconds,
    heartbeatSeconds: options.heartbeatSeconds,
    pollingIntervalSeconds,
  });
  let started = false;
  let stopped = false;
  const workerIds: string[] = [];

  return {
    async start() {
      await boss.start();
      await jobs.create();
      await createSideQueues(boss, SIDE_QUEUES);
      await warmSideQueues(boss, SIDE_QUEUES);
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
      if (started) await jobs.handBack();
      const pool = boss.getDb();
      if ("close" in pool && typeof pool.close === "function") await pool.close();
    },

    enqueueJob: (client, job) => jobs.enqueueJobs(client, [job]),
    enqueueJobs: jobs.enqueueJobs,
    enqueueConfigCheck: (client, check) => enqueueConfigCheck(boss, client, check),
    enqueueReady: (check, where) => enqueueReady(boss, check, where),
    enqueueAutomationSync: (sync) => enqueueAutomationSync(boss, sync),
    setSchedules: (repositoryId, wanted) => setSchedules(boss, repositoryId, wanted),
    scheduledRepositories: () => scheduledRepositories(boss),

    async work(handler, hooks = {}) {
      workerIds.push(...(await jobs.work(handler)));
      const sides = [
        await workSideQueue(boss, readyChecks, hooks.onReady, pollingIntervalSeconds),
        await workSideQueue(boss, notices, hooks.onNotice, pollingIntervalSeconds),
        await workSideQueue(boss, automationQueue, hooks.onAutomation, pollingIntervalSeconds),
        await workSideQueue(boss, configChecks, hooks.onConfigCheck, pollingIntervalSeconds),
      ];
      for (const id of sides) if (id !== undefined) workerIds.push(id);
      await jobs.workDead(hooks.onDead);
    },

    cancel: (jobId) => requestJobCancel(db.pool, jobId),

    wake() {
      for (const id of workerIds) boss.notifyWorker(id);
    },

    every: (name, seconds, task) => every(boss, logger, name, seconds, task),

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
