// Refuses a turn up front when its daily budget, or its owner's monthly one, is spent, with
// OpenAI's 429, rather than queueing a job that would stop at once. The worker still reserves the budget itself (chat-turn/settings).
import { checkRepoConfig, type RepoSettings, resolveSettings } from "../config/repo-config.ts";
import { startOfUtcDay, startOfUtcMonth } from "../jobs/run/settings.ts";
import { spentSince } from "../store/jobs.ts";
import { ownerSpender, spentBySpender } from "../store/spenders.ts";
import type { Queryable } from "../store/sql.ts";
import type { Principal } from "./auth.ts";
import { ApiError } from "./errors.ts";
import type { ChatModel } from "./models.ts";

export async function checkBudget(
  db: Queryable,
  defaults: RepoSettings,
  who: Principal,
  chatModel: ChatModel,
): Promise<void> {
  const repository = chatModel.repository;
  const page = repository ? checkRepoConfig(repository.settings) : undefined;
  const settings = resolveSettings({ defaults, page: page?.ok ? page.config : null }).values;
  const spent = await spentSince(
    db,
    repository ? { repositoryId: repository.id } : { scratchOwner: who },
    startOfUtcDay(new Date()),
  );
  if (spent >= settings.maxDailyCostUsd) {
    throw quotaError(
      `The daily budget ($${settings.maxDailyCostUsd.toFixed(2)}) of ${repository ? repository.fullName : "your scratch conversations"} is spent; try again tomorrow (UTC).`,
    );
  }
  const cap = settings.maxMonthlyCostUsdPerUser;
  if (cap === null) return;
  const month = startOfUtcMonth(new Date());
  if ((await spentBySpender(db, ownerSpender(who), month)) < cap) return;
  throw quotaError(
    `Your monthly budget ($${cap.toFixed(2)}, maxMonthlyCostUsdPerUser) is spent: it counts your jobs and chat turns in every repository this month (UTC); try again next month.`,
  );
}

const quotaError = (message: string) =>
  new ApiError(429, "insufficient_quota", "insufficient_quota", message);
