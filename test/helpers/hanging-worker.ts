// A worker in its own process that takes a job and hangs in it until killed: for crash tests and
// the recovery benchmark.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { QueueOptions } from "../../src/jobs/queue/queue.ts";
import { TYPESCRIPT_FLAGS } from "./typescript.ts";

const src = (path: string) => fileURLToPath(new URL(`../../src/${path}`, import.meta.url));

/** Starts the worker on the database at url, waits until it runs jobId, then kills it (SIGKILL). */
export async function killWorkerMidJob(
  url: string,
  options: QueueOptions,
  jobId: number,
): Promise<void> {
  const code = `
    import { openDatabase } from ${JSON.stringify(src("store/database.ts"))};
    import { createQueue } from ${JSON.stringify(src("jobs/queue/queue.ts"))};
    const db = await openDatabase({ databaseUrl: process.env.DB_URL, dataDir: "", migrate: false });
    const queue = createQueue(db, JSON.parse(process.env.QUEUE_OPTIONS));
    await queue.start();
    await queue.work(async ({ jobId }) => {
      console.log("started " + jobId);
      await new Promise(() => {});
    });
  `;
  const child = spawn(process.execPath, [...TYPESCRIPT_FLAGS, "--input-type=module", "-e", code], {
    env: { ...process.env, DB_URL: url, QUEUE_OPTIONS: JSON.stringify(options) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  for await (const line of lines) {
    if (line === `started ${jobId}`) break;
  }
  child.kill("SIGKILL");
  await once(child, "exit");
}
