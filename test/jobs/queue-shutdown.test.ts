// Graceful shutdown: stop() lets running jobs finish for the drain time, then hands the rest back
// to the queue, where another worker takes them up without waiting for their heartbeat to lapse.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createQueue, type Queue, type QueueOptions } from "../../src/jobs/queue/queue.ts";
import type { Database } from "../../src/store/database.ts";
import { getJob, insertJob } from "../../src/store/jobs.ts";
import { withTransaction } from "../../src/store/sql.ts";
import { connectAgain, databases, newJob, seedConversation } from "../helpers/db.ts";

// The heartbeat and retry delays outlast the tests: only the hand-back can explain a rerun.
const OPTIONS: QueueOptions = {
  pollingIntervalSeconds: 0.5,
  heartbeatSeconds: 600,
  retryDelay: 0,
  retryBackoff: false,
  concurrency: 1,
};

describe.each(databases())("queue shutdown on $name", (target) => {
  // Two pools on one database: two worker processes.
  let db: Database;
  let otherDb: Database;
  const queues: Queue[] = [];

  beforeAll(async () => {
    db = await target.open();
    otherDb = await connectAgain(db);
  });
  afterAll(async () => {
    for (const queue of queues) await queue.stop();
    await otherDb.close();
    await db.close();
  });

  async function startQueue(on: Database, options: QueueOptions): Promise<Queue> {
    const queue = createQueue(on, options);
    queues.push(queue);
    await queue.start();
    return queue;
  }

  async function enqueue(queue: Queue): Promise<number> {
    const { conversation, key } = await seedConversation(db);
    return withTransaction(db.pool, async (client) => {
      const job = await insertJob(client, newJob(conversation));
      await queue.enqueueJob(client, { jobId: job.id, conversationKey: key });
      return job.id;
    });
  }

  it("lets a job that ends within the drain time succeed", async () => {
    const queue = await startQueue(db, { ...OPTIONS, drainSeconds: 600 });
    const jobId = await enqueue(queue);
    let finish!: () => void;
    const ends = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const abortedAtEnd: boolean[] = [];
    await new Promise<void>((running) => {
      queue.work(async ({ signal }) => {
        running();
        await ends;
        abortedAtEnd.push(signal.aborted);
      });
    });
    const stopping = queue.stop();
    expect(await queue.healthy()).toBe(false);
    finish();
    await stopping;
    expect(abortedAtEnd).toEqual([false]);
    expect(await getJob(db.pool, jobId)).toMatchObject({ status: "succeeded", attempts: 1 });
  });

  it("hands a job still running after the drain time to another worker", {
    timeout: 8_000,
  }, async () => {
    const stopping = await startQueue(db, { ...OPTIONS, retryDelay: 600, drainSeconds: 1 });
    const jobId = await enqueue(stopping);
    await new Promise<void>((running) => {
      stopping.work(async ({ signal }) => {
        running();
        await new Promise((_, reject) => signal.addEventListener("abort", reject));
      });
    });
    const other = await startQueue(otherDb, OPTIONS);
    const reruns: number[] = [];
    const rerun = new Promise<void>((resolve) => {
      other.work(async ({ attempt }) => {
        reruns.push(attempt);
        resolve();
      });
    });
    await stopping.stop();
    await rerun;
    expect(reruns).toEqual([2]);
    await other.stop();
    expect(await getJob(db.pool, jobId)).toMatchObject({ status: "succeeded", attempts: 2 });
  });
});
