// The settings a job runs with: defaults < the settings page < `.github/vmpilot.yml`, and how much
// of the repository's daily budget this attempt may reserve.
import type pg from "pg";
import type { ProbotOctokit } from "probot";
import { checkRepoConfig, type RepoSettings, resolveSettings } from "../../config/repo-config.ts";
import {
  loadRepoConfig,
  type RepoConfigLoad,
  renderConfigError,
} from "../../github/repo-config-loader.ts";
import { getRepository } from "../../store/installations.ts";
import { type IssueJob, reserveBudget } from "../../store/jobs.ts";

export type JobSettings =
  | { ok: true; settings: RepoSettings /** The most this attempt may spend. */; budgetUsd: number }
  /** `body`: a ready comment (invalid config); otherwise `error` is the whole story. */
  | { ok: false; error: string; body?: string };

export function startOfUtcDay(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
}

export async function jobSettings(
  db: pg.Pool,
  octokit: ProbotOctokit,
  job: IssueJob,
  view: {
    jobUrl: string;
    command: string;
    owner: string;
    repo: string;
    /** The worker's defaults, as the settings page shows them. */
    defaults?: RepoSettings;
    now?: Date;
    /** Already read (by the acknowledgement); read here when not given. */
    repoConfig?: RepoConfigLoad;
  },
): Promise<JobSettings> {
  const load =
    view.repoConfig ?? (await loadRepoConfig(octokit, { owner: view.owner, repo: view.repo }));
  if (!load.ok) {
    return {
      ok: false,
      error: `invalid ${load.source}: ${load.message}`,
      body: renderConfigError(load, { jobId: job.id, jobUrl: view.jobUrl, command: view.command }),
    };
  }
  // The settings page validates on save; a stored value that no longer fits is ignored.
  const page = checkRepoConfig((await getRepository(db, job.repositoryId))?.settings ?? {});
  const settings = resolveSettings({
    defaults: view.defaults,
    page: page.ok ? page.config : null,
    file: load.config,
  }).values;
  const budget = await reserveBudget(db, {
    jobId: job.id,
    repositoryId: job.repositoryId,
    since: startOfUtcDay(view.now ?? new Date()),
    maxDailyUsd: settings.maxDailyCostUsd,
    maxJobUsd: settings.maxCostUsd,
  });
  if (budget.dailyLeftUsd <= 0) {
    const error = `This repository reached its daily cost limit ($${settings.maxDailyCostUsd.toFixed(2)}), counting what running jobs may still spend; vmpilot will work again tomorrow (UTC), or a maintainer can raise maxDailyCostUsd.`;
    return { ok: false, error };
  }
  if (budget.jobLeftUsd <= 0) {
    const error = `This job already spent its limit of $${settings.maxCostUsd.toFixed(2)} (maxCostUsd).`;
    return { ok: false, error };
  }
  return { ok: true, settings, budgetUsd: budget.grantUsd };
}
