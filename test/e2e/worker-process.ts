// A vmpilot server in a process of its own (plain `node`), for tests that kill it or run
// several: the real startServer, role "worker" unless told otherwise, on a shared database. The
// parent passes the configuration, role, queue and work options as JSON in
// VMPILOT_TEST_WORKER, and waits for "ready" on stdout; the line before it is "url <server URL>".
// SIGTERM stops it as it stops `npm start`: closed (its last spans sent), then exit 0.
import type { Config } from "../../src/config/env.ts";
import type { QueueOptions } from "../../src/jobs/queue/queue.ts";
import type { JobDeps } from "../../src/jobs/run/deps.ts";
import { createLogger } from "../../src/log/logger.ts";
import { startServer } from "../../src/main.ts";
import type { Role } from "../../src/roles/startup.ts";
import { TestProbotOctokit, testConfig } from "../helpers/app.ts";

interface WorkerOptions {
  config: Partial<Config>;
  role?: Role;
  queue?: Omit<QueueOptions, "logger">;
  work?: Partial<JobDeps>;
  /** Probot's pacing of each installation's writes, a second apart; default on, as in production. */
  paced?: boolean;
}

const options = JSON.parse(process.env.VMPILOT_TEST_WORKER ?? "{}") as WorkerOptions;
const server = await startServer({
  config: testConfig(options.config),
  role: options.role ?? "worker",
  logger: createLogger({ level: "silent", format: "json" }),
  queue: options.queue,
  work: options.work,
  ...(options.paced === false && { Octokit: TestProbotOctokit }),
});
console.log(`url ${server.url}`);
console.log("ready");
process.once("SIGTERM", () => {
  server.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
