// What the web and worker roles of one process share. startServer (main.ts) opens it all and runs
// `cleanup` in reverse on close; a role adds the steps that undo what it started.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Probot } from "probot";
import type { Plugin } from "../agent/plugins.ts";
import type { Config } from "../config/env.ts";
import type { RepoSettings } from "../config/repo-config.ts";
import type { Queue } from "../jobs/queue/queue.ts";
import type { Database } from "../store/database.ts";
import type { Readiness } from "./readiness.ts";

/** Answers a request and returns true, or returns false (or nothing) to pass it on. */
export type Handler = (req: IncomingMessage, res: ServerResponse) => unknown;

export type Cleanup = Array<() => Promise<unknown> | unknown>;

export interface RoleContext {
  config: Config;
  db: Database;
  queue: Queue;
  probot: Probot;
  readiness: Readiness;
  logger: Logger;
  cleanup: Cleanup;
  /** The plugins discovered at startup. */
  plugins: readonly Plugin[];
  /** Settings before the settings page and the repository file. */
  defaults: RepoSettings;
}

export async function fetchAppSlug(probot: Probot): Promise<string> {
  const octokit = await probot.auth();
  // untilReachable does the retrying, with backoff that Octokit's retry plugin does not have.
  const { data } = await octokit.rest.apps.getAuthenticated({ request: { retries: 0 } });
  if (!data?.slug) throw new Error("GET /app did not return the app's slug");
  return data.slug;
}
