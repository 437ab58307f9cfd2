// The settings a job runs with: defaults < the settings page < `.github/vmpilot.yml`, and how much
// of the repository's daily budget, and of its requester's monthly one, this attempt may reserve.
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

export function startOfUtcMonth(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

/**
 * The requester's monthly budget as reserveBudget takes it: the cap is the setting of the
 * repository the job runs on (the defaults', on scratch), and what counts against it is what the
 * person spent this month (UTC) everywhere this vmpilot runs. Undefined when no cap is set.
 */
export function monthlyBudget(settings: RepoSettings, now: Date) {
  const cap = settings.maxMonthlyCostUsdPerUser;
  return cap === null ? undefined : { since: startOfUtcMonth(now), maxUsd: cap };
}

/** Why a job or turn was refused by the monthly per-person budget, said to whom it is for. */
export function monthlyLimitText(cap: number, who: "requester" | "you"): string {
  const [subject, their] = who === "you" ? ["You", "your"] : ["This job's requester", "their"];
  return `${subject} reached the monthly cost limit per person ($${cap.toFixed(2)}, maxMonthlyCostUsdPerUser), which counts ${their} jobs and chats this month (UTC) in every repository vmpilot works on, with what running ones may still spend; it resets on the 1st, or a maintainer can raise maxMonthlyCostUsdPerUser.`;
}

export async function jobSettings(
  db: pg.Pool,
  octokit: ProbotOctokit,
  /** A scheduled automation's job has no item: only its id and repository count here. */
  job: Pick<IssueJob, "id" | "repositoryId">,
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
  const now = view.now ?? new Date();
  const budget = await reserveBudget(db, {
    jobId: job.id,
    repositoryId: job.repositoryId,
    since: startOfUtcDay(now),
    maxDailyUsd: settings.maxDailyCostUsd,
    maxJobUsd: settings.maxCostUsd,
    monthly: monthlyBudget(settings, now),
  });
  if (budget.dailyLeftUsd <= 0) {
    const error = `This repository reached its daily cost limit ($${settings.maxDailyCostUsd.toFixed(2)}), counting what running jobs may still spend; vmpilot will work again tomorrow (UTC), or a maintainer can raise maxDailyCostUsd.`;
    return { ok: false, error };
  }
  if (budget.monthlyLeftUsd !== undefined && budget.monthlyLeftUsd <= 0) {
    const error = monthlyLimitText(settings.maxMonthlyCostUsdPerUser ?? 0, "requester");
    return { ok: false, error };
  }
  if (budget.jobLeftUsd <= 0) {
    const error = `This job already spent its limit of $${settings.maxCostUsd.toFixed(2)} (maxCostUsd).`;
    return { ok: false, error };
  }
  return { ok: true, settings, budgetUsd: budget.grantUsd };
}
