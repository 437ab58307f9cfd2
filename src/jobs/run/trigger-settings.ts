// Whether a job is wanted and who may start it: the settings page under `.github/vmpilot.yml`,
// read fresh for every job (the intake only knows what the file said when it was last read).
import type { ProbotOctokit } from "probot";
import {
  checkRepoConfig,
  type RepoConfig,
  type RepoSettings,
  resolveSettings,
} from "../../config/repo-config.ts";
import {
  checkPermission,
  type PermissionQuery,
  type PermissionResult,
} from "../../github/permissions.ts";
import { loadRepoConfig, type RepoConfigLoad } from "../../github/repo-config-loader.ts";
import type { Database } from "../../store/database.ts";
import {
  getRepository,
  type Repository,
  setRepositoryFileSettings,
} from "../../store/installations.ts";
import type { JobContext } from "../../store/job-context.ts";
import type { IssueJob } from "../../store/jobs.ts";
import type { Queryable } from "../../store/sql.ts";

/**
 * The file's keys the intake, the acknowledgement, the ready-for-review check and the automations'
 * schedules act on.
 */
const TRIGGER_KEYS = [
  "enabled",
  "label",
  "triggerPolicy",
  "allowedUsers",
  "ci",
  "readyForReview",
  "automations",
] as const;

export interface TriggerSettings {
  settings: RepoSettings;
  /**
   * The file, read again for this job (the pipeline uses it); settles after the read stored what
   * the file now says for the intake.
   */
  repoConfig: Promise<RepoConfigLoad>;
}

export async function loadTriggerSettings(
  db: Database,
  octokit: ProbotOctokit,
  job: IssueJob,
  context: JobContext,
  defaults: RepoSettings | undefined,
): Promise<TriggerSettings> {
  const repoConfig = loadRepoConfig(octokit, { owner: context.owner, repo: context.name }).then(
    async (load) => {
      await rememberFileSettings(db.pool, job.repositoryId, load);
      return load;
    },
  );
  // Settled by whoever awaits it; meanwhile a failure must not count as unhandled.
  repoConfig.catch(() => undefined);
  const repository = await getRepository(db.pool, job.repositoryId);
  // What the file said when last read decides, so the 👀 does not wait for the read; a push that
  // changes the file makes that unknown, and then the read is awaited. An invalid file is
  // reported by the pipeline; until it is fixed, the page decides alone.
  const file = knownFile(repository) ?? fileOf(await repoConfig);
  return { settings: settingsOver(repository, file, defaults), repoConfig };
}

/**
 * A repository's settings as the chat face checks them on every request: the page over what the
 * file said when last read; when that is unknown, the file is read, and remembered, now.
 */
export async function repositoryTriggerSettings(
  db: Queryable,
  octokit: ProbotOctokit,
  repository: Repository,
  defaults: RepoSettings | undefined,
): Promise<RepoSettings> {
  const known = knownFile(repository);
  if (known) return settingsOver(repository, known, defaults);
  const [owner = "", repo = ""] = repository.fullName.split("/");
  const load = await loadRepoConfig(octokit, { owner, repo });
  await rememberFileSettings(db, repository.id, load);
  return settingsOver(repository, fileOf(load), defaults);
}

/** An invalid file is reported where a job runs; until it is fixed, the page decides alone. */
const fileOf = (load: RepoConfigLoad): RepoConfig | null => (load.ok ? load.config : null);

/** Stores the trigger keys of a fresh read of the file, for whoever decides before reading it. */
export async function rememberFileSettings(
  db: Queryable,
  repositoryId: number,
  load: RepoConfigLoad,
): Promise<void> {
  if (!load.ok) return;
  const file = load.config;
  const known = Object.fromEntries(
    TRIGGER_KEYS.flatMap((key) => (key in file ? [[key, file[key]]] : [])),
  );
  await setRepositoryFileSettings(db, repositoryId, known);
}

/** What the file said when last read; undefined when that is unknown, or was invalid. */
function knownFile(repository: Repository | undefined): RepoConfig | undefined {
  const known = repository?.fileSettings ? checkRepoConfig(repository.fileSettings) : undefined;
  return known?.ok ? known.config : undefined;
}

function settingsOver(
  repository: Repository | undefined,
  file: RepoConfig | null,
  defaults: RepoSettings | undefined,
): RepoSettings {
  const page = checkRepoConfig(repository?.settings ?? {});
  return resolveSettings({ defaults, page: page.ok ? page.config : null, file }).values;
}

/**
 * The one gate of every door (issues, pull requests, the chat face): ALLOWED_USERS and the
 * repository's allowedUsers always; anyone with write access too, unless the repository's
 * triggerPolicy is allow-list.
 */
export function mayTrigger(
  octokit: ProbotOctokit,
  query: Omit<PermissionQuery, "policy">,
  settings: Pick<RepoSettings, "allowedUsers" | "triggerPolicy">,
): Promise<PermissionResult> {
  return checkPermission(octokit, {
    ...query,
    allowedUsers: [...query.allowedUsers, ...settings.allowedUsers],
    policy: settings.triggerPolicy,
  });
}

/** Why a job the intake let through is not wanted after all, or undefined when it is. */
export function unwanted(
  job: IssueJob,
  context: JobContext,
  settings: RepoSettings,
): string | undefined {
  if (!settings.enabled) return "vmpilot is disabled for this repository";
  if (job.trigger === "label" && context.label.toLowerCase() !== settings.label.toLowerCase()) {
    return `label ${context.label} is not the repository's trigger label ${settings.label}`;
  }
  return undefined;
}
