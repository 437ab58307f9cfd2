// A chat turn's settings and budget: a repository's as for its issue jobs (defaults, settings page,
// `.github/vmpilot.yml`, the same gate, daily limit shared with them); a scratch workspace's from
// the defaults, with the daily limit counted per conversation owner (the operator, or a person by
// GitHub user id). Either budget is reserved, with the conversation owner's monthly one where the
// settings cap it, so concurrent turns never promise more than the day or the month allows.
import {
  checkRepoConfig,
  defaults,
  type RepoSettings,
  resolveSettings,
} from "../../../config/repo-config.ts";
import { loadRepoConfig } from "../../../github/repo-config-loader.ts";
import { getApiConversation } from "../../../store/api-conversations.ts";
import { getRepository } from "../../../store/installations.ts";
import { type BudgetGrant, type Job, reserveBudget } from "../../../store/jobs.ts";
import { readChatTurnRequest } from "../../queue/chat-turn-request.ts";
import { monthlyBudget, monthlyLimitText, startOfUtcDay } from "../../run/settings.ts";
import { mayTrigger, rememberFileSettings } from "../../run/trigger-settings.ts";
import type { PipelineDeps } from "../issue/run.ts";

export type TurnSettings =
  | { ok: true; settings: RepoSettings; budgetUsd: number }
  | { ok: false; error: string };

export type ChatTurnDeps = Pick<PipelineDeps, "db" | "auth" | "defaults"> & {
  /** ALLOWED_USERS: may act on every repository. */
  allowedUsers: readonly string[];
};

export async function chatTurnSettings(deps: ChatTurnDeps, job: Job): Promise<TurnSettings> {
  const db = deps.db.pool;
  const now = new Date();
  const limits = (settings: RepoSettings) => ({
    jobId: job.id,
    since: startOfUtcDay(now),
    maxDailyUsd: settings.maxDailyCostUsd,
    maxJobUsd: settings.maxCostUsd,
    monthly: monthlyBudget(settings, now),
  });
  const conversationOwner = (await getApiConversation(db, job.conversationId))?.owner;
  // A conversation stored before owners were ids, whose owner could not be told, is nobody's to go
  // on.
  if (!conversationOwner)
    return { ok: false, error: "This conversation has no known owner; start a new chat." };
  if (job.repositoryId === null || job.installationId === null) {
    const settings = deps.defaults ?? defaults;
    const budget = await reserveBudget(db, {
      scratchOwner: conversationOwner,
      ...limits(settings),
    });
    if (budget.dailyLeftUsd <= 0) {
      return { ok: false, error: dailyLimit(settings, "Your scratch conversations") };
    }
    if (monthlyReached(budget)) return { ok: false, error: monthlyLimit(settings) };
    return { ok: true, settings, budgetUsd: budget.grantUsd };
  }
  const repository = await getRepository(db, job.repositoryId);
  if (!repository || repository.removedAt) {
    return { ok: false, error: "The app is no longer installed on this repository." };
  }
  const [owner = "", name = ""] = repository.fullName.split("/");
  const octokit = await deps.auth(job.installationId);
  const load = await loadRepoConfig(octokit, { owner, repo: name });
  if (!load.ok) return { ok: false, error: `invalid ${load.source}: ${load.message}` };
  await rememberFileSettings(db, repository.id, load);
  const page = checkRepoConfig(repository.settings);
  const settings = resolveSettings({
    defaults: deps.defaults,
    page: page.ok ? page.config : null,
    file: load.config,
  }).values;
  if (!settings.enabled) {
    return { ok: false, error: "vmpilot is turned off for this repository (`enabled: false`)." };
  }
  // The web side let the request in; the policy may have changed while the turn waited, and the
  // file read here is newer than what the web side knew. The operator passes: the conversation is
  // theirs (a flag, never a login) and the request says it came with their key.
  if (!(conversationOwner.kind === "operator" && readChatTurnRequest(job).operator)) {
    const query = { owner, repo: name, username: job.requester, allowedUsers: deps.allowedUsers };
    if (!(await mayTrigger(octokit, query, settings)).allowed) {
      return {
        ok: false,
        error: `${job.requester} may no longer use vmpilot on ${repository.fullName} (its triggerPolicy or allowedUsers).`,
      };
    }
  }
  const budget = await reserveBudget(db, { repositoryId: repository.id, ...limits(settings) });
  if (budget.dailyLeftUsd <= 0) {
    return { ok: false, error: dailyLimit(settings, "This repository") };
  }
  if (monthlyReached(budget)) return { ok: false, error: monthlyLimit(settings) };
  return { ok: true, settings, budgetUsd: budget.grantUsd };
}

const monthlyReached = (budget: BudgetGrant) =>
  budget.monthlyLeftUsd !== undefined && budget.monthlyLeftUsd <= 0;

const monthlyLimit = (settings: RepoSettings) =>
  monthlyLimitText(settings.maxMonthlyCostUsdPerUser ?? 0, "you");

function dailyLimit(settings: RepoSettings, who: string): string {
  return `${who} reached the daily cost limit ($${settings.maxDailyCostUsd.toFixed(2)}); try again tomorrow (UTC), or a maintainer can raise maxDailyCostUsd.`;
}
