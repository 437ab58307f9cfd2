// Reads that only the web pages need; everything else comes from the store's modules.
import type { Queryable } from "../store/sql.ts";

export interface UsageRow {
  /** UTC day, YYYY-MM-DD. */
  day: string;
  repo: string;
  jobs: number;
  inputTokens: number;
  outputTokens: number;
  cacheTokens: number;
  costUsd: number;
}

/**
 * Tokens and cost per repository per UTC day, for jobs created in the last `days` days; with the
 * chat-face turns the person `scratchOwnerId` (a GitHub user id) ran on scratch workspaces as one
 * more "repository", `scratch`.
 */
export async function usageByDay(
  db: Queryable,
  repositoryIds: number[],
  days: number,
  scratchOwnerId: number | null = null,
): Promise<UsageRow[]> {
  const { rows } = await db.query<{
    day: string;
    repo: string;
    jobs: string;
    input_tokens: string;
    output_tokens: string;
    cache_tokens: string;
    cost_usd: string;
  }>(
    `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
            max(repo) AS repo,
            count(*) AS jobs,
            sum(coalesce((usage->>'inputTokens')::bigint, 0)) AS input_tokens,
            sum(coalesce((usage->>'outputTokens')::bigint, 0)) AS output_tokens,
            sum(coalesce((usage->>'cacheCreationInputTokens')::bigint, 0)
              + coalesce((usage->>'cacheReadInputTokens')::bigint, 0)) AS cache_tokens,
            sum(cost_usd) AS cost_usd
       FROM jobs
      WHERE (repository_id = ANY($1::bigint[])
             OR (repository_id IS NULL AND trigger = 'chat' AND chat_id IN
                   (SELECT id FROM chats WHERE kind = 'api' AND api_owner_id = $3)))
        AND created_at >= (date_trunc('day', now() AT TIME ZONE 'UTC') - make_interval(days => $2 - 1))
                          AT TIME ZONE 'UTC'
      GROUP BY 1, repository_id
      ORDER BY 1 DESC, 2`,
    [repositoryIds, days, scratchOwnerId],
  );
  return rows.map((r) => ({
    day: r.day,
    repo: r.repo,
    jobs: Number(r.jobs),
    inputTokens: Number(r.input_tokens),
    outputTokens: Number(r.output_tokens),
    cacheTokens: Number(r.cache_tokens),
    costUsd: Number(r.cost_usd),
  }));
}
