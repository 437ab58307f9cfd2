// Whether a job is wanted and who may start it: the settings page under `.github/vmpilot.yml`,
// read fresh for every job (the intake only knows what the file said when it was last read).
import type { ProbotOctokit } from "probot";
import {
  checkRepoConfig,
  type RepoConfig,
  type RepoSettings,
  resolveSettings,
} from "../config/repo-config.ts";
import type { JobContext } from "../github/job-context.ts";
import { loadRepoConfig, type RepoConfigLoad } from "../github/repo-config-loader.ts";
import type { Database } from "../store/database.ts";
import { getRepository, setRepositoryFileSettings } from "../store/installations.ts";
import type { IssueJob } from "../store/jobs.ts";

/** The file's keys the intake, the acknowledgement and the ready-for-review check act on. */
const TRIGGER_KEYS = [
  "enabled",
  "label",
  "triggerPolicy",
  "allowedUsers",
  "ci",
  "readyForReview",
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
      if (load.ok) {
        const file = load.config;
        const known = Object.fromEntries(
          TRIGGER_KEYS.flatMap((key) => (key in file ? [[key, file[key]]] : [])),
        );
        await setRepositoryFileSettings(db.pool, job.repositoryId, known);
      }
      return load;
    },
  );
  // Settled by whoever awaits it; meanwhile a failure must not count as unhandled.
  repoConfig.catch(() => undefined);
  const repository = await getRepository(db.pool, job.repositoryId);
  // What the file said when last read decides, so the 👀 does not wait for the read; a push that
  // changes the file makes that unknown, and then the read is awaited. An invalid file is
  // reported by the pipeline; until it is fixed, the page decides alone.
  const known = repository?.fileSettings ? checkRepoConfig(repository.fileSettings) : undefined;
  let file: RepoConfig | null;
  if (known?.ok) file = known.config;
  else {
    const load = await repoConfig;
    file = load.ok ? load.config : null;
  }
  const page = checkRepoConfig(repository?.settings ?? {});
  const settings = resolveSettings({ defaults, page: page.ok ? page.config : null, file }).values;
  return { settings, repoConfig };
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
