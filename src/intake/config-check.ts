// A head that may change `.github/vmpilot.yml` gets a "vmpilot config" check run, made by the
// worker (jobs/config-check.ts). The intake claims the repository's head and queues the check in
// one transaction, so a push and a pull request naming one commit, or a redelivery, queue it once.
import type { Context } from "probot";
import type { ConfigCheckRequest, Queue } from "../jobs/queue/queue.ts";
import { claimConfigCheck } from "../store/config-checks.ts";
import type { Database } from "../store/database.ts";
import { withTransaction } from "../store/sql.ts";

export interface ConfigCheckIntake {
  db: Database;
  queue: Pick<Queue, "enqueueConfigCheck" | "wake">;
}

type PullRequestPayload = Context<
  "pull_request.opened" | "pull_request.synchronize" | "pull_request.reopened"
>["payload"];

/** Returns whether the check was queued (false: this head was queued before). */
export async function recordConfigCheck(
  deps: ConfigCheckIntake,
  check: ConfigCheckRequest,
): Promise<boolean> {
  const queued = await withTransaction(deps.db.pool, async (client) => {
    if (!(await claimConfigCheck(client, check.repositoryId, check.headSha))) return false;
    await deps.queue.enqueueConfigCheck(client, check);
    return true;
  });
  if (queued) deps.queue.wake();
  return queued;
}

/**
 * Any opened or updated pull request may change the file, and only its list of files tells: the
 * worker asks for it. A fork's pull request is checked too: the check reads the fork's file at
 * the head (through the base repository, which holds the pull request's commits), never runs
 * anything from it, and tells the maintainers what merging it would do.
 */
export function recordPullRequestCheck(
  deps: ConfigCheckIntake,
  payload: PullRequestPayload,
): Promise<boolean> {
  const repository = payload.repository;
  if (!payload.installation) return Promise.resolve(false);
  return recordConfigCheck(deps, {
    installationId: payload.installation.id,
    repositoryId: repository.id,
    owner: repository.owner.login,
    repo: repository.name,
    headSha: payload.pull_request.head.sha,
    changes: { kind: "pull_request", number: payload.pull_request.number },
  });
}
