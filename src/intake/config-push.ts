// A push that changes `.github/vmpilot.yml` gets its head checked ("vmpilot config", see
// config-check.ts), on any branch. On the default branch it also makes what the intake knows of
// the file stale; the next job's worker reads it again, and so does a sync of the automations'
// schedules queued here (jobs/automations.ts). No GitHub call here, as everywhere in the intake.
import type { Context } from "probot";
import { isSkillFile } from "../config/skills.ts";
import { REPO_CONFIG_PATH } from "../github/repo-config-loader.ts";
import { MAX_SKILL_CHECKS } from "../jobs/queue/config-checks.ts";
import type { Queue } from "../jobs/queue/queue.ts";
import { forgetFileSettings } from "../store/installations.ts";
import { type ConfigCheckIntake, recordConfigCheck } from "./config-check.ts";

type PushPayload = Context<"push">["payload"];

/** GitHub lists at most this many commits in a push payload; a longer push may hide the file. */
const LISTED_COMMITS = 20;

/**
 * Whether the push's commits name the file or a skill ("listed"), or are too many to tell
 * ("unlisted"); and the skills' files they add or change.
 */
function configChange(payload: PushPayload) {
  if (payload.commits.length >= LISTED_COMMITS) {
    return { change: "unlisted" as const, skills: [] as string[] };
  }
  const written = payload.commits.flatMap((commit) => [
    ...(commit.added ?? []),
    ...(commit.modified ?? []),
  ]);
  const removed = payload.commits.flatMap((commit) => commit.removed ?? []);
  // A skill removed again by a later commit is not at the head: the check finds none to read.
  const skills = [...new Set(written.filter(isSkillFile))].slice(0, MAX_SKILL_CHECKS);
  const listed = [...written, ...removed].includes(REPO_CONFIG_PATH) || skills.length > 0;
  return { change: listed ? ("listed" as const) : undefined, skills };
}

/** Returns whether the push may have changed the file. */
export async function recordConfigPush(
  deps: ConfigCheckIntake & { queue: Pick<Queue, "enqueueAutomationSync"> },
  payload: PushPayload,
): Promise<boolean> {
  const { change, skills } = configChange(payload);
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
      changes: { kind: "push", listed: change === "listed", skills },
    });
  }
  return true;
}
