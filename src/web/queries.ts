// Reads that only the web pages need; everything else comes from the store's modules.
import {
  OPERATOR_SPENDER,
  SPENDER_LOGIN,
  SPENDER_OF_JOB,
  type SpenderKey,
} from "../store/spenders.ts";
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

/** A person's share of the usage (spenders.ts says who a job's spender is). */
export interface PersonUsageRow {
  /** Null for conversations stored before owners were ids, which nobody is known to own. */
  spender: SpenderKey | null;
  /** The login their newest job in the window showed; null for the operator's key. */
  login: string | null;
  jobs: number;
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
}

/**
 * The jobs a page of usage counts, `j` with its conversation LEFT JOINed as `c`: those of the
 * repositories $1 created in the last $2 UTC days, and the chat-face turns the person $3 (a GitHub
 * user id) ran on scratch workspaces.
 */
const USAGE_JOBS = `FROM jobs j LEFT JOIN conversations c ON c.id = j.conversation_id
      WHERE (j.repository_id = ANY($1::bigint[])
             OR (j.repository_id IS NULL AND j.trigger = 'chat' AND c.kind = 'api'
                 AND c.api_owner_id = $3))
        AND j.created_at >= (date_trunc('day', now() AT TIME ZONE 'UTC') - make_interval(days => $2 - 1))
                            AT TIME ZONE 'UTC'`;

const TOKENS = `sum(coalesce((j.usage->>'inputTokens')::bigint, 0)) AS input_tokens,
            sum(coalesce((j.usage->>'outputTokens')::bigint, 0)) AS output_tokens`;

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
    `SELECT to_char(j.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day,
            max(j.repo) AS repo,
            count(*) AS jobs,
            ${TOKENS},
            sum(coalesce((j.usage->>'cacheCreationInputTokens')::bigint, 0)
              + coalesce((j.usage->>'cacheReadInputTokens')::bigint, 0)) AS cache_tokens,
            sum(j.cost_usd) AS cost_usd
       ${USAGE_JOBS}
      GROUP BY 1, j.repository_id
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

/**
 * Tokens and cost per person over the same jobs as usageByDay: an issue job's requester, a chat
 * turn's conversation owner (the owner of the key it came with), the operator's key and apps as
 * more. People are grouped by GitHub user id where the job knows it, else by login (spenders.ts);
 * the most spent first.
 */
export async function usageByPerson(
  db: Queryable,
  repositoryIds: number[],
  days: number,
  scratchOwnerId: number | null = null,
): Promise<PersonUsageRow[]> {
  const { rows } = await db.query<{
    spender: string | null;
    login: string | null;
    jobs: string;
    input_tokens: string;
    output_tokens: string;
    cost_usd: string;
  }>(
    `SELECT ${SPENDER_OF_JOB} AS spender,
            (array_agg(${SPENDER_LOGIN} ORDER BY j.id DESC))[1] AS login,
            count(*) AS jobs,
            ${TOKENS},
            sum(j.cost_usd) AS cost_usd
       ${USAGE_JOBS}
      GROUP BY 1
      ORDER BY sum(j.cost_usd) DESC, 2`,
    [repositoryIds, days, scratchOwnerId],
  );
  return rows.map((r) => ({
    spender: r.spender,
    login: r.spender === OPERATOR_SPENDER ? null : r.login,
    jobs: Number(r.jobs),
    inputTokens: Number(r.input_tokens),
    outputTokens: Number(r.output_tokens),
    costUsd: Number(r.cost_usd),
  }));
}
