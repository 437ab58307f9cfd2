// A vmpilot worker in a process of its own (`node --import tsx`), for tests that kill it: the real
// startServer with role "worker" on a shared database. The parent passes the configuration, queue
// and pipeline options as JSON in VMPILOT_TEST_WORKER, and waits for "ready" on stdout.
import type { Config } from "../../src/config/env.ts";
import { createLogger } from "../../src/github/logger.ts";
import type { PipelineDeps } from "../../src/jobs/pipeline.ts";
import type { QueueOptions } from "../../src/jobs/queue.ts";
import { startServer } from "../../src/main.ts";
import { testConfig } from "../helpers/app.ts";

interface WorkerOptions {
  config: Partial<Config>;
  queue?: Omit<QueueOptions, "logger">;
  pipeline?: Partial<PipelineDeps>;
}

const options = JSON.parse(process.env.VMPILOT_TEST_WORKER ?? "{}") as WorkerOptions;
await startServer({
  config: testConfig(options.config),
  role: "worker",
  logger: createLogger({ level: "silent", format: "json" }),
  queue: options.queue,
  pipeline: options.pipeline,
});
console.log("ready");
