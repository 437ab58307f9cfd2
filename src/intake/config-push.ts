// A push that changes `.github/vmpilot.yml` on the default branch makes what the intake knows of
// the file stale; the next job's worker reads it again. No GitHub call here, as everywhere in the
// intake.
import type { Context } from "probot";
import { REPO_CONFIG_PATH } from "../github/repo-config-loader.ts";
import type { Database } from "../store/database.ts";
import { forgetFileSettings } from "../store/installations.ts";

type PushPayload = Context<"push">["payload"];

/** GitHub lists at most this many commits in a push payload; a longer push may hide the file. */
const LISTED_COMMITS = 20;

function touchesConfig(payload: PushPayload): boolean {
  if (payload.commits.length >= LISTED_COMMITS) return true;
  return payload.commits.some((commit) =>
    [...(commit.added ?? []), ...(commit.modified ?? []), ...(commit.removed ?? [])].includes(
      REPO_CONFIG_PATH,
    ),
  );
}

/** Returns whether the push changed what vmpilot knows of the file. */
export async function recordConfigPush(db: Database, payload: PushPayload): Promise<boolean> {
  const repository = payload.repository;
  if (payload.ref !== `refs/heads/${repository.default_branch}` || !touchesConfig(payload)) {
    return false;
  }
  // The owner's `.github` repository holds the file for every repository that has none.
  const scope =
    repository.name === ".github" && payload.installation
      ? { installationId: payload.installation.id }
      : { repositoryId: repository.id };
  await forgetFileSettings(db.pool, scope);
  return true;
}
