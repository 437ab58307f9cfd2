import { type ChildProcess, spawn } from "node:child_process";
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
function spawnHangingWorker(url: string): ChildProcess {
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
    env: { ...process.env, DB_URL: url, QUEUE_OPTIONS: JSON.stringify(CRASHY) },
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

  it("reruns the job of a worker killed mid-job, once", { timeout: 60_000 }, async () => {
    queue = createQueue(db, CRASHY);
    await queue.start();
    const { chat, key } = await seedChat(db);
    const jobId = await withTransaction(db.pool, async (client) => {
      const job = await insertJob(client, newJob(chat));
      await queue?.enqueueJob(client, { jobId: job.id, chatKey: key });
      return job.id;
    });

    const child = spawnHangingWorker(db.url);
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    for await (const line of lines) {
      if (line === `started ${jobId}`) break;
    }
    child.kill("SIGKILL");
    await once(child, "exit");

    const reruns: number[] = [];
    const rerun = new Promise<void>((resolve) => {
      queue?.work(async (job) => {
        reruns.push(job.attempt);
        resolve();
      });
    });
    await rerun;
    await queue.stop();
    expect(reruns).toEqual([2]);
    expect(await getJob(db.pool, jobId)).toMatchObject({ status: "succeeded", attempts: 2 });
  });
});
