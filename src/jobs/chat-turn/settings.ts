// A chat turn's settings and budget: a repository's as for its issue jobs (defaults, settings page,
// `.github/vmpilot.yml`, daily limit shared with them); a scratch workspace's from the defaults,
// with the daily limit counted per key owner.
import {
  checkRepoConfig,
  defaults,
  type RepoSettings,
  resolveSettings,
} from "../../config/repo-config.ts";
import { loadRepoConfig } from "../../github/repo-config-loader.ts";
import { getRepository } from "../../store/installations.ts";
import { type Job, reserveBudget, spentSince } from "../../store/jobs.ts";
import { startOfUtcDay } from "../pipeline/settings.ts";
import type { PipelineDeps } from "../pipeline.ts";

export type TurnSettings =
  | { ok: true; settings: RepoSettings; budgetUsd: number }
  | { ok: false; error: string };

export async function chatTurnSettings(deps: PipelineDeps, job: Job): Promise<TurnSettings> {
  const db = deps.db.pool;
  const since = startOfUtcDay(new Date());
  if (job.repositoryId === null || job.installationId === null) {
    const settings = deps.defaults ?? defaults;
    const spent = await spentSince(db, { scratchOwner: job.requester }, since, job.id);
    const left = settings.maxDailyCostUsd - spent;
    if (left <= 0) return { ok: false, error: dailyLimit(settings, "Your scratch chats") };
    return { ok: true, settings, budgetUsd: Math.min(left, settings.maxCostUsd - job.costUsd) };
  }
  const repository = await getRepository(db, job.repositoryId);
  if (!repository || repository.removedAt) {
    return { ok: false, error: "The app is no longer installed on this repository." };
  }
  const [owner = "", name = ""] = repository.fullName.split("/");
  const load = await loadRepoConfig(await deps.auth(job.installationId), { owner, repo: name });
  if (!load.ok) return { ok: false, error: `invalid ${load.source}: ${load.message}` };
  const page = checkRepoConfig(repository.settings);
  const settings = resolveSettings({
    defaults: deps.defaults,
    page: page.ok ? page.config : null,
    file: load.config,
  }).values;
  if (!settings.enabled) {
    return { ok: false, error: "vmpilot is turned off for this repository (`enabled: false`)." };
  }
  const budget = await reserveBudget(db, {
    jobId: job.id,
    repositoryId: job.repositoryId,
    since,
    maxDailyUsd: settings.maxDailyCostUsd,
    maxJobUsd: settings.maxCostUsd,
  });
  if (budget.dailyLeftUsd <= 0)
    return { ok: false, error: dailyLimit(settings, "This repository") };
  return { ok: true, settings, budgetUsd: budget.grantUsd };
}

function dailyLimit(settings: RepoSettings, who: string): string {
  return `${who} reached the daily cost limit ($${settings.maxDailyCostUsd.toFixed(2)}); try again tomorrow (UTC), or a maintainer can raise maxDailyCostUsd.`;
}
