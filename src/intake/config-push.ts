// A push that changes `.github/vmpilot.yml` gets its head checked ("vmpilot config", see
// config-check.ts), on any branch. On the default branch it also makes what the intake knows of
// the file stale; the next job's worker reads it again, and so does a sync of the automations'
// schedules queued here (jobs/automations.ts). No GitHub call here, as everywhere in the intake.
import type { Context } from "probot";
import { REPO_CONFIG_PATH } from "../github/repo-config-loader.ts";
import type { Queue } from "../jobs/queue/queue.ts";
import { forgetFileSettings } from "../store/installations.ts";
import { type ConfigCheckIntake, recordConfigCheck } from "./config-check.ts";

type PushPayload = Context<"push">["payload"];

/** GitHub lists at most this many commits in a push payload; a longer push may hide the file. */
const LISTED_COMMITS = 20;

/** Whether the push's commits name the file ("listed"), or are too many to tell ("unlisted"). */
function configChange(payload: PushPayload): "listed" | "unlisted" | undefined {
  if (payload.commits.length >= LISTED_COMMITS) return "unlisted";
  const listed = payload.commits.some((commit) =>
    [...(commit.added ?? []), ...(commit.modified ?? []), ...(commit.removed ?? [])].includes(
      REPO_CONFIG_PATH,
    ),
  );
  return listed ? "listed" : undefined;
}

/** Returns whether the push may have changed the file. */
export async function recordConfigPush(
  deps: ConfigCheckIntake & { queue: Pick<Queue, "enqueueAutomationSync"> },
  payload: PushPayload,
): Promise<boolean> {
  const change = configChange(payload);
  if (!change) return false;
  const repository = payload.repository;
  if (payload.ref === `refs/heads/${repository.default_branch}`) {
    // The owner's `.github` repository holds the file for every repository that has none.
    const scope =
      repository.name === ".github" && payload.installation
        ? { installationId: payload.installation.id }
        : { repositoryId: repository.id };
    await forgetFileSettings(deps.db.pool, scope);
    if (payload.installation) {
      await deps.queue.enqueueAutomationSync({
        installationId: payload.installation.id,
        ...("repositoryId" in scope && scope),
      });
    }
  }
  const owner = repository.owner?.login;
  // A deleted branch has no head to check.
  if (payload.installation && owner && payload.ref.startsWith("refs/heads/") && !payload.deleted) {
    await recordConfigCheck(deps, {
      installationId: payload.installation.id,
      repositoryId: repository.id,
      owner,
      repo: repository.name,
      headSha: payload.after,
      changes: { kind: "push", listed: change === "listed" },
    });
  }
  return true;
}
