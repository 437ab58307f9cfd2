import { TestClock } from "pg-boss";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { health } from "../../src/health.ts";
import {
  createQueue,
  type DeadJob,
  type JobHandler,
  type Queue,
  type QueueOptions,
} from "../../src/jobs/queue/queue.ts";
import type { Database } from "../../src/store/database.ts";
import { listJobEvents } from "../../src/store/job-events.ts";
import { getJob, insertJob } from "../../src/store/jobs.ts";
import { withTransaction } from "../../src/store/sql.ts";
import { connectAgain, databases, newJob, seedConversation } from "../helpers/db.ts";

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const FAST: QueueOptions = { pollingIntervalSeconds: 0.5, cancelCheckMs: 100, concurrency: 3 };

/**
 * Moves the queues' clock on, a poll at a time, until `settled` settles: polls, the supervisor and
 * retry delays come as they fall due, without the test waiting them out.
 */
async function ticking<T>(clock: TestClock, settled: Promise<T>): Promise<T> {
  let done = false;
  const end = () => {
    done = true;
  };
  settled.then(end, end);
  while (!done) await clock.tick(500);
  return settled;
}

describe.each(databases())("queue on $name", (target) => {
  // Two pools on one database: two worker processes.
  let db: Database;
  let otherDb: Database;
  let queues: Queue[] = [];

  beforeAll(async () => {
    db = await target.open();
    otherDb = await connectAgain(db);
  });
  afterEach(async () => {
    await Promise.all(queues.map((q) => q.stop()));
    queues = [];
  });
  afterAll(async () => {
    await otherDb.close();
    await db.close();
  });

  async function startQueue(on: Database, options: QueueOptions = {}) {
    const queue = createQueue(on, { ...FAST, ...options });
    queues.push(queue);
    await queue.start();
    return queue;
  }

  async function enqueue(
    queue: Queue,
    conversation: { id: number; repositoryId: number; number: number },
    key: string,
  ) {
    return withTransaction(db.pool, async (client) => {
      const job = await insertJob(client, newJob(conversation));
      await queue.enqueueJob(client, { jobId: job.id, conversationKey: key });
      return job.id;
    });
  }

  it("enqueues with the caller's transaction, or not at all", async () => {
    const queue = await startQueue(db);
    const { conversation, key } = await seedConversation(db);
    await expect(
      withTransaction(db.pool, async (client) => {
        const job = await insertJob(client, newJob(conversation));
        await queue.enqueueJob(client, { jobId: job.id, conversationKey: key });
        throw new Error("intake crashed");
      }),
    ).rejects.toThrow("intake crashed");
    const jobId = await enqueue(queue, conversation, key);

    const { rows } = await db.pool.query(
      "SELECT data->>'jobId' AS id FROM pgboss.job WHERE singleton_key = $1",
      [key],
    );
    expect(rows).toEqual([{ id: String(jobId) }]);
    const ran = deferred<number>();
    await queue.work(async (job) => ran.resolve(job.jobId));
    expect(await ran.promise).toBe(jobId);
  });

  it("enqueues a batch in one call, with the caller's transaction or not at all", async () => {
    const clock = new TestClock();
    const queue = await startQueue(db, { clock });
    const a = await seedConversation(db);
    const b = await seedConversation(db);
    const enqueueBatch = (fail: boolean) =>
      withTransaction(db.pool, async (client) => {
        const jobs = [];
        for (const { conversation, key } of [a, b, a, a, a]) {
          const job = await insertJob(client, newJob(conversation));
          jobs.push({ jobId: job.id, conversationKey: key });
        }
        await queue.enqueueJobs(client, jobs);
        if (fail) throw new Error("intake crashed");
        return jobs;
      });
    await expect(enqueueBatch(true)).rejects.toThrow("intake crashed");
    const jobs = await enqueueBatch(false);

    const { rows } = await db.pool.query(
      `SELECT (data->>'jobId')::int AS "jobId", singleton_key AS "conversationKey" FROM pgboss.job
       WHERE singleton_key = ANY($1) ORDER BY created_on, (data->>'jobId')::int`,
      [[a.key, b.key]],
    );
    expect(rows).toEqual(jobs);
    const ran: number[] = [];
    const allRan = deferred();
    await queue.work(async ({ jobId }) => {
      ran.push(jobId);
      if (ran.length === jobs.length) allRan.resolve();
    });
    await ticking(clock, allRan.promise);
    expect([...ran].sort((x, y) => x - y)).toEqual(jobs.map((j) => j.jobId));
    // One transaction gives the batch one created_on: a's jobs still run in the order enqueued.
    const aJobs = jobs.filter((j) => j.conversationKey === a.key).map((j) => j.jobId);
    expect(ran.filter((id) => aJobs.includes(id))).toEqual(aJobs);
  });

  it("wakes every idle worker of the process, not just the first", async () => {
    // Polling too slow for the test's time limit: only wake() gets the jobs run in time.
    const queue = await startQueue(db, { concurrency: 2, pollingIntervalSeconds: 60 });
    const a = await seedConversation(db);
    const b = await seedConversation(db);
    const started = new Map([a.key, b.key].map((key) => [key, deferred()]));
    const release = deferred();
    const running: string[] = [];
    await queue.work(async ({ conversationKey }) => {
      running.push(conversationKey);
      started.get(conversationKey)?.resolve();
      await release.promise;
    });
    await enqueue(queue, a.conversation, a.key);
    queue.wake();
    await started.get(a.key)?.promise;
    // One worker is busy with a's job; the other is asleep and must be the one woken.
    await enqueue(queue, b.conversation, b.key);
    queue.wake();
    await started.get(b.key)?.promise;
    expect(running).toEqual([a.key, b.key]);
    release.resolve();
  }, 10_000);

  it("runs every job exactly once across two worker processes, one at a time per conversation", async () => {
    const producer = await startQueue(db);
    const conversations = await Promise.all(Array.from({ length: 8 }, () => seedConversation(db)));
    const ids: number[] = [];
    for (let round = 0; round < 3; round++) {
      for (const { conversation, key } of conversations)
        ids.push(await enqueue(producer, conversation, key));
    }

    const runs = new Map<number, number>();
    const order = new Map<string, number[]>();
    const active = new Map<string, number>();
    let overlap = 0;
    const allRan = deferred();
    const handler: JobHandler = async ({ jobId, conversationKey }) => {
      runs.set(jobId, (runs.get(jobId) ?? 0) + 1);
      order.set(conversationKey, [...(order.get(conversationKey) ?? []), jobId]);
      active.set(conversationKey, (active.get(conversationKey) ?? 0) + 1);
      if ((active.get(conversationKey) ?? 0) > 1) overlap++;
      // Simulated work, to hold the conversation while the other process polls.
      await new Promise((r) => setTimeout(r, 30));
      active.set(conversationKey, (active.get(conversationKey) ?? 0) - 1);
      if ([...runs.values()].reduce((a, b) => a + b, 0) >= ids.length) allRan.resolve();
    };
    // One clock for both, as two processes share the database's.
    const clock = new TestClock();
    const first = await startQueue(db, { clock });
    const second = await startQueue(otherDb, { clock });
    await Promise.all([first.work(handler), second.work(handler)]);
    await ticking(clock, allRan.promise);
    await Promise.all([first.stop(), second.stop()]);

    expect([...runs.keys()].sort((a, b) => a - b)).toEqual(ids);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(overlap).toBe(0);
    for (const jobIds of order.values()) expect(jobIds).toEqual([...jobIds].sort((a, b) => a - b));
    const { rows } = await db.pool.query(
      "SELECT DISTINCT status FROM jobs WHERE id = ANY($1::bigint[])",
      [ids],
    );
    expect(rows).toEqual([{ status: "succeeded" }]);
  });

  it("holds a conversation's next job while its first runs, and runs other conversations meanwhile", async () => {
    const clock = new TestClock();
    const queue = await startQueue(db, { clock });
    const a = await seedConversation(db);
    const b = await seedConversation(db);
    const a1 = await enqueue(queue, a.conversation, a.key);
    const a2 = await enqueue(queue, a.conversation, a.key);
    const b1 = await enqueue(queue, b.conversation, b.key);

    const events: string[] = [];
    const b1Started = deferred();
    const a2Done = deferred();
    await queue.work(async ({ jobId }) => {
      events.push(`start ${jobId}`);
      // a1 waits for b1, which was enqueued after a2: were the conversation not held, a2 (older)
      // would have been picked up before b1.
      if (jobId === a1) await b1Started.promise;
      if (jobId === b1) b1Started.resolve();
      events.push(`end ${jobId}`);
      if (jobId === a2) a2Done.resolve();
    });
    await ticking(clock, a2Done.promise);

    expect(events.indexOf(`start ${b1}`)).toBeLessThan(events.indexOf(`end ${a1}`));
    expect(events.indexOf(`start ${a2}`)).toBeGreaterThan(events.indexOf(`end ${a1}`));
  });

  it("cancels a running job from another process at its worker's next check, and a waiting one outright", async () => {
    // The worker's clock: its checks for cancel requests come only as the test moves it.
    const clock = new TestClock();
    const worker = await startQueue(db, { clock, cancelCheckMs: 100 });
    const canceller = await startQueue(otherDb);
    const { conversation, key } = await seedConversation(db);
    const running = await enqueue(worker, conversation, key);
    const waiting = await enqueue(worker, conversation, key);

    const started = deferred();
    const aborted = deferred();
    const ran: number[] = [];
    await worker.work(async ({ jobId, signal }) => {
      ran.push(jobId);
      started.resolve();
      await new Promise((_, reject) => {
        signal.addEventListener("abort", () => {
          aborted.resolve();
          reject(signal.reason);
        });
      });
    });
    await ticking(clock, started.promise);
    expect(await canceller.cancel(waiting)).toBe("cancelled");
    expect(await canceller.cancel(running)).toBe("requested");
    // One check's worth of the worker's time, and no more: the job ends on that check.
    await clock.tick(100);
    await aborted.promise;
    await worker.stop();

    expect(ran).toEqual([running]);
    expect(await getJob(db.pool, running)).toMatchObject({ status: "cancelled", attempts: 1 });
    expect(await getJob(db.pool, waiting)).toMatchObject({ status: "cancelled", attempts: 0 });
    expect(await canceller.cancel(running)).toBe("finished");
  });

  it("retries with backoff, then dead-letters, tells onDead, and frees the conversation", async () => {
    // The backoff passes on the queue's clock, which moves only as the test waits.
    const clock = new TestClock();
    const queue = await startQueue(db, {
      retryLimit: 1,
      retryDelay: 1,
      retryBackoff: true,
      clock,
    });
    const { conversation, key } = await seedConversation(db);
    const doomed = await enqueue(queue, conversation, key);
    const next = await enqueue(queue, conversation, key);

    const attempts: { attempt: number; at: number }[] = [];
    // What ran, in order: the test clock moves only as the test waits, so the conversation's next
    // job may start at the very time the doomed one's last attempt did.
    const order: string[] = [];
    const nextRan = deferred<number>();
    const dead = deferred<DeadJob>();
    await queue.work(
      async ({ jobId, attempt, maxAttempts }) => {
        order.push(jobId === next ? "next" : `doomed ${attempt}`);
        if (jobId === next) return nextRan.resolve(clock.now());
        expect(maxAttempts).toBe(2);
        attempts.push({ attempt, at: clock.now() });
        throw new Error(`model overloaded (attempt ${attempt})`);
      },
      { onDead: async (job) => dead.resolve(job) },
    );
    await ticking(clock, Promise.all([dead.promise, nextRan.promise]));

    expect(await dead.promise).toEqual({
      jobId: doomed,
      conversationKey: key,
      error: "model overloaded (attempt 2)",
    });
    const nextAt = await nextRan.promise;
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2]);
    expect((attempts[1]?.at ?? 0) - (attempts[0]?.at ?? 0)).toBeGreaterThanOrEqual(1000);
    expect(nextAt).toBeGreaterThanOrEqual(attempts[1]?.at ?? Infinity);
    expect(order).toEqual(["doomed 1", "doomed 2", "next"]);
    await queue.stop();

    expect(await getJob(db.pool, doomed)).toMatchObject({
      status: "dead",
      attempts: 2,
      error: "model overloaded (attempt 2)",
    });
    const events = (await listJobEvents(db.pool, doomed)).map((e) => e.type);
    expect(events).toEqual([
      "attempt_started",
      "attempt_failed",
      "attempt_started",
      "attempt_failed",
      "dead",
    ]);
    expect(await getJob(db.pool, next)).toMatchObject({ status: "succeeded" });
  });

  it("reports health for /healthz", async () => {
    const queue = createQueue(db, FAST);
    queues.push(queue);
    expect(await health(db, queue)).toEqual({
      database: "ok",
      queue: "error",
      waiting: {},
    });
    await queue.start();
    expect(await health(db, queue)).toMatchObject({ database: "ok", queue: "ok" });
  });
});
