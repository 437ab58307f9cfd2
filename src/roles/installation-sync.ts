// The installations and repositories tables follow GitHub even without webhooks (a new database, a
// restore, an app installed while it was down): workers reconcile them with GitHub at start and
// every INSTALLATION_SYNC_MINUTES, one run at a time across all processes.
import type pg from "pg";
import type { ProbotOctokit } from "probot";
import { listInstallationRepositories, listInstallations } from "../github/installations.ts";
import type { Queue } from "../jobs/queue/queue.ts";
import type { Logger } from "../log/logger.ts";
import {
  databaseTime,
  type ListedRepository,
  markUnlistedInstallationsDeleted,
  reconcileInstallation,
} from "../store/installations.ts";

const SYNC_QUEUE = "vmpilot-installation-sync";

export interface InstallationSyncDeps {
  pool: pg.Pool;
  /** The app's own client (a JWT). */
  app(): Promise<ProbotOctokit>;
  /** An installation's client. */
  auth(installationId: number): Promise<ProbotOctokit>;
  logger: Logger;
  /**
   * Runs after each periodic reconciliation, in the same run (one process at a time): the
   * automations' schedules follow the repositories (automations.ts).
   */
  afterSync?: (signal: AbortSignal) => Promise<void>;
}

/**
 * One reconciliation: every installation GitHub lists, then each one's repositories in turn.
 * Resolves to the number of rows changed.
 */
export async function syncInstallations(
  deps: InstallationSyncDeps,
  signal?: AbortSignal,
): Promise<number> {
  const since = await databaseTime(deps.pool);
  const installations = await listInstallations(await deps.app());
  let changed = 0;
  for (const installation of installations) {
    signal?.throwIfAborted();
    let repositories: ListedRepository[] | undefined;
    // A suspended installation gets no token; its repositories stay as they were.
    if (!installation.suspended) {
      try {
        repositories = await listInstallationRepositories(await deps.auth(installation.id));
      } catch (error) {
        deps.logger.warn(
          { err: error, installationId: installation.id },
          "could not list an installation's repositories; they stay as they were",
        );
      }
    }
    changed += await reconcileInstallation(deps.pool, since, installation, repositories);
  }
  const ids = installations.map((installation) => installation.id);
  return changed + (await markUnlistedInstallationsDeleted(deps.pool, since, ids));
}

/** Reconciles now and every `minutes` (0: never); returns the stop. */
export function startInstallationSync(
  queue: Pick<Queue, "every">,
  minutes: number,
  deps: InstallationSyncDeps,
): Promise<() => void> {
  if (minutes <= 0) return Promise.resolve(() => undefined);
  return queue.every(SYNC_QUEUE, minutes * 60, async (signal) => {
    try {
      const changed = await syncInstallations(deps, signal);
      if (changed > 0) deps.logger.info({ changed }, "reconciled the installations with GitHub");
    } catch (error) {
      deps.logger.warn({ err: error }, "could not reconcile the installations with GitHub");
    }
    try {
      await deps.afterSync?.(signal);
    } catch (error) {
      deps.logger.warn({ err: error }, "could not bring the automations' schedules up to date");
    }
  });
}
