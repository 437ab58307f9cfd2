import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createQueue, type Queue, type QueueOptions } from "../../src/jobs/queue.ts";
import type { Database } from "../../src/store/database.ts";
import { getJob, insertJob } from "../../src/store/jobs.ts";
import { withTransaction } from "../../src/store/sql.ts";
import { databases, newJob, seedChat } from "../helpers/db.ts";

// The shortest heartbeat pg-boss allows; a dead worker's job is reclaimed after it lapses.
const CRASHY: QueueOptions = {
  heartbeatSeconds: 10,
  superviseIntervalSeconds: 1,
  pollingIntervalSeconds: 0.5,
  retryDelay: 0,
  retryBackoff: false,
  concurrency: 1,
};

const src = (path: string) => fileURLToPath(new URL(`../../src/${path}`, import.meta.url));

/** A worker process that takes one job, says so on stdout, and then hangs until killed. */
function spawnHangingWorker(url: string, options: QueueOptions): ChildProcess {
  const code = `
    import { openDatabase } from ${JSON.stringify(src("store/database.ts"))};
    import { createQueue } from ${JSON.stringify(src("jobs/queue.ts"))};
    const db = await openDatabase({ databaseUrl: process.env.DB_URL, dataDir: "", migrate: false });
    const queue = createQueue(db, JSON.parse(process.env.QUEUE_OPTIONS));
    await queue.start();
    await queue.work(async ({ jobId }) => {
      console.log("started " + jobId);
      await new Promise(() => {});
    });
  `;
  return spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", code], {
    env: { ...process.env, DB_URL: url, QUEUE_OPTIONS: JSON.stringify(options) },
    stdio: ["ignore", "pipe", "inherit"],
  });
}

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

  /** Enqueues a job, lets a child worker with these options take it, and kills the child. */
  async function killMidJob(options: QueueOptions): Promise<number> {
    queue = createQueue(db, options);
    await queue.start();
    const { chat, key } = await seedChat(db);
    const jobId = await withTransaction(db.pool, async (client) => {
      const job = await insertJob(client, newJob(chat));
      await queue?.enqueueJob(client, { jobId: job.id, chatKey: key });
      return job.id;
    });
    const child = spawnHangingWorker(db.url, options);
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    for await (const line of lines) {
      if (line === `started ${jobId}`) break;
    }
    child.kill("SIGKILL");
    await once(child, "exit");
    return jobId;
  }

  /** Runs the next job this queue's worker gets; resolves with its attempt number. */
  async function rerun(): Promise<number[]> {
    const reruns: number[] = [];
    await new Promise<void>((resolve) => {
      queue?.work(async (job) => {
        reruns.push(job.attempt);
        resolve();
      });
    });
    await queue?.stop();
    return reruns;
  }

  it("reruns the job of a worker killed mid-job, once", { timeout: 60_000 }, async () => {
    const jobId = await killMidJob(CRASHY);
    expect(await rerun()).toEqual([2]);
    expect(await getJob(db.pool, jobId)).toMatchObject({ status: "succeeded", attempts: 2 });
  });

  it("a restarted worker reruns its dead instance's job without waiting for the heartbeat", {
    timeout: 30_000,
  }, async () => {
    // Only the shared identity can explain a rerun: the heartbeat outlasts the test.
    const jobId = await killMidJob({ ...CRASHY, heartbeatSeconds: 600, workerId: randomUUID() });
    expect(await rerun()).toEqual([2]);
    expect(await getJob(db.pool, jobId)).toMatchObject({ status: "succeeded", attempts: 2 });
  });
});
