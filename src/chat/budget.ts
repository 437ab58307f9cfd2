// Refuses a turn up front when its daily budget, or its owner's monthly one, is spent, with
// OpenAI's 429, rather than queueing a job that would stop at once. The worker still reserves the
// budget itself (jobs/run/settings.ts), with the same texts.
import type { RepoSettings } from "../config/repo-config.ts";
import { limitText, settingsOver, startOfUtcDay, startOfUtcMonth } from "../jobs/run/settings.ts";
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
  const settings = settingsOver(repository ?? undefined, null, defaults).values;
  const spent = await spentSince(
    db,
    repository ? { repositoryId: repository.id } : { scratchOwner: who },
    startOfUtcDay(new Date()),
  );
  if (spent >= settings.maxDailyCostUsd) {
    const whose = repository ? "This repository" : "Your scratch conversations";
    throw quotaError(limitText.daily(settings, whose));
  }
  const cap = settings.maxMonthlyCostUsdPerUser;
  if (cap === null) return;
  const month = startOfUtcMonth(new Date());
  if ((await spentBySpender(db, ownerSpender(who), month)) < cap) return;
  throw quotaError(limitText.monthly(settings, "you"));
}

const quotaError = (message: string) =>
  new ApiError(429, "insufficient_quota", "insufficient_quota", message);
