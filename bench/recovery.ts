// Crash recovery: seconds from a worker's restart (after kill -9 mid-job) to its job running again.
// The restarted worker keeps its identity, so it hands the dead instance's job back at once; the
// heartbeat outlasts the run, so it plays no part. Goal: under 10 s. PostgreSQL when
// TEST_DATABASE_URL is set, else PGlite.
import { randomUUID } from "node:crypto";
import { createQueue, type QueueOptions } from "../src/jobs/queue/queue.ts";
import { insertJob } from "../src/store/jobs.ts";
import { withTransaction } from "../src/store/sql.ts";
import { databases, newJob, seedConversation } from "../test/helpers/db.ts";
import { killWorkerMidJob } from "../test/helpers/hanging-worker.ts";

// The queue's own defaults but for the heartbeat, and the identity a restart keeps.
const OPTIONS: QueueOptions = { heartbeatSeconds: 600, concurrency: 1, workerId: randomUUID() };

const target = databases().at(-1);
if (!target) throw new Error("no database to run on");
const db = await target.open();
const producer = createQueue(db, OPTIONS);
await producer.start();
const { conversation, key } = await seedConversation(db);
const jobId = await withTransaction(db.pool, async (client) => {
  const job = await insertJob(client, newJob(conversation));
  await producer.enqueueJob(client, { jobId: job.id, conversationKey: key });
  return job.id;
});
await producer.stop();
await killWorkerMidJob(db.url, OPTIONS, jobId);

const restartedAt = performance.now();
const restarted = createQueue(db, OPTIONS);
await restarted.start();
const attempt = await new Promise<number>((resolve) => {
  restarted.work(async (job) => resolve(job.attempt));
});
const seconds = (performance.now() - restartedAt) / 1000;
await restarted.stop();
await db.close();
console.log(
  `restart to re-run (${target.name}, attempt ${attempt}): ${seconds.toFixed(2)} s (goal < 10 s)`,
);
