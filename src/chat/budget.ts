// Refuses a turn up front when its daily budget is spent, with OpenAI's 429, rather than queueing
// a job that would stop at once. The worker still reserves the budget itself (chat-turn/settings).
import { checkRepoConfig, type RepoSettings, resolveSettings } from "../config/repo-config.ts";
import { startOfUtcDay } from "../jobs/pipeline/settings.ts";
import { spentSince } from "../store/jobs.ts";
import type { Queryable } from "../store/sql.ts";
import type { Agent } from "./agents.ts";
import type { Principal } from "./auth.ts";
import { ApiError } from "./errors.ts";

export async function checkBudget(
  db: Queryable,
  defaults: RepoSettings,
  who: Principal,
  agent: Agent,
): Promise<void> {
  const repository = agent.repository;
  const page = repository ? checkRepoConfig(repository.settings) : undefined;
  const settings = resolveSettings({ defaults, page: page?.ok ? page.config : null }).values;
  const spent = await spentSince(
    db,
    repository ? { repositoryId: repository.id } : { scratchOwner: who },
    startOfUtcDay(new Date()),
  );
  if (spent < settings.maxDailyCostUsd) return;
  throw new ApiError(
    429,
    "insufficient_quota",
    "insufficient_quota",
    `The daily budget ($${settings.maxDailyCostUsd.toFixed(2)}) of ${repository ? repository.fullName : "your scratch chats"} is spent; try again tomorrow (UTC).`,
  );
}
