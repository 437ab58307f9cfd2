import { randomUUID } from "node:crypto";
import { TestClock } from "pg-boss";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createQueue, type Queue, type QueueOptions } from "../../src/jobs/queue/queue.ts";
import type { Database } from "../../src/store/database.ts";
import { getJob, insertJob } from "../../src/store/jobs.ts";
import { withTransaction } from "../../src/store/sql.ts";
import { databases, newJob, seedConversation } from "../helpers/db.ts";
import { killWorkerMidJob } from "../helpers/hanging-worker.ts";

// The shortest heartbeat pg-boss allows; a dead worker's job is reclaimed after it lapses.
const CRASHY: QueueOptions = {
  heartbeatSeconds: 10,
  superviseIntervalSeconds: 1,
  pollingIntervalSeconds: 0.5,
  retryDelay: 0,
  retryBackoff: false,
  concurrency: 1,
};

describe.each(databases())("queue crash recovery on $name", (target) => {
  let db: Database;
  let queue: Queue | undefined;
  beforeAll(async () => {
    db = await target.open();
  });
  afterAll(async () => {
    await queue?.stop();
    await db.close();
  });

  /**
   * Enqueues a job, lets a child worker with these options take it, and kills the child. This
   * process's queue, which reruns the job, runs on `clock` when given.
   */
  async function killMidJob(options: QueueOptions, clock?: TestClock): Promise<number> {
    queue = createQueue(db, { ...options, clock });
    await queue.start();
    const { conversation, key } = await seedConversation(db);
    const jobId = await withTransaction(db.pool, async (client) => {
      const job = await insertJob(client, newJob(conversation));
      await queue?.enqueueJob(client, { jobId: job.id, conversationKey: key });
      return job.id;
    });
    await killWorkerMidJob(db.url, options, jobId);
    return jobId;
  }

  /**
   * Runs the next job this queue's worker gets; resolves with its attempt number. With a clock,
   * time moves on as the rerun waits: polls, the supervisor and retry delays fire as they fall due.
   */
  async function rerun(clock?: TestClock): Promise<number[]> {
    const reruns: number[] = [];
    let ran = false;
    const running = new Promise<void>((resolve) => {
      queue?.work(async (job) => {
        reruns.push(job.attempt);
        ran = true;
        resolve();
      });
    });
    while (clock && !ran) await clock.tick(500);
    await running;
    await queue?.stop();
    return reruns;
  }

  it("reruns the job of a worker killed mid-job, once", async () => {
    const clock = new TestClock();
    const jobId = await killMidJob(CRASHY, clock);
    // The dead worker's last heartbeat was just now (by the real clock, which it ran on).
    await clock.setTime(Date.now());
    expect(await rerun(clock)).toEqual([2]);
    expect(await getJob(db.pool, jobId)).toMatchObject({ status: "succeeded", attempts: 2 });
  });

  it("a restarted worker reruns its dead instance's job without waiting for heartbeat or retry delay", {
    timeout: 30_000,
  }, async () => {
    // Only the shared identity can explain a rerun: heartbeat and retry delay outlast the test.
    const restart = { ...CRASHY, heartbeatSeconds: 600, retryDelay: 600, workerId: randomUUID() };
    const jobId = await killMidJob(restart);
    expect(await rerun()).toEqual([2]);
    expect(await getJob(db.pool, jobId)).toMatchObject({ status: "succeeded", attempts: 2 });
  });
});
