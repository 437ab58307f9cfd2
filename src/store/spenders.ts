// Whose money a job spends, for the monthly per-person budget (maxMonthlyCostUsdPerUser) and the
// per-person totals of /usage. A person is their GitHub numeric user id wherever it is known: an
// issue job's requester by jobs.context.requesterId (the intake records the sender's id; CI and
// merge jobs carry over their requester's), a chat turn by its conversation's owner
// (conversations.api_owner_id).
// A job that never recorded the id counts under its requester's login, apart from the id: a login
// can change hands, so the two are never joined. The operator's key spends as one more spender. An
// app (a `[bot]` login: vmpilot's own automations, and the CI fixes and merges that follow them) is
// no person: /usage shows it, no person's budget counts it. An automation that anyone's issue starts
// (authors: any) is the app's too, but the issue's author spends it: its job records their id.
import { z } from "zod";
import type { ConversationOwner } from "./api-conversations.ts";
import type { Queryable } from "./sql.ts";
import { numeric, queryRows } from "./stored-value.ts";

/** A user id ("123"), "login:<login>" for a job without one, "operator", or "app:<login>". */
export type SpenderKey = string;

/** An issue job's spender; the expression the jobs_spender_created index is on. */
const ISSUE_SPENDER = "coalesce(j.context->>'requesterId', 'login:' || j.requester)";

/**
 * A chat-face conversation's spender; null for a conversation stored before owners were ids,
 * nobody's.
 */
const CHAT_SPENDER = "CASE WHEN c.api_operator THEN 'operator' ELSE c.api_owner_id::text END";

/** The spender key of job `j`, its conversation LEFT JOINed as `c`. */
export const SPENDER_OF_JOB = `CASE WHEN j.trigger = 'chat' THEN ${CHAT_SPENDER}
  WHEN j.requester LIKE '%[bot]' AND j.context->>'requesterId' IS NULL THEN 'app:' || j.requester
  ELSE ${ISSUE_SPENDER} END`;

/**
 * The login to show for job `j`'s spender: the conversation owner's for a chat turn, the issue's
 * author for an app's job that a person spends.
 */
export const SPENDER_LOGIN = `CASE WHEN j.trigger = 'chat' THEN c.api_owner
  WHEN j.requester LIKE '%[bot]' AND j.context->>'requesterId' IS NOT NULL
    THEN j.context->'automation'->>'author'
  ELSE j.requester END`;

export const OPERATOR_SPENDER: SpenderKey = "operator";

export function ownerSpender(owner: ConversationOwner): SpenderKey {
  return owner.kind === "operator" ? OPERATOR_SPENDER : String(owner.id);
}

/**
 * The spender's jobs (id, cost_usd, reserved_usd, finished_at) created at $3 or later, or with
 * the id $2; the key is $1. Issue jobs and chat turns apart, so each part uses its index.
 */
export function spenderJobs(key: SpenderKey): string {
  const conversations =
    key === OPERATOR_SPENDER
      ? "c.api_operator"
      : /^\d+$/.test(key)
        ? "c.api_owner_id = $1::text::bigint"
        : "false";
  return `SELECT j.id, j.cost_usd, j.reserved_usd, j.finished_at FROM jobs j
           WHERE j.trigger <> 'chat' AND ${ISSUE_SPENDER} = $1::text
             AND (j.created_at >= $3 OR j.id = $2)
          UNION ALL
          SELECT j.id, j.cost_usd, j.reserved_usd, j.finished_at FROM conversations c
            JOIN jobs j ON j.conversation_id = c.id
           WHERE c.kind = 'api' AND ${conversations} AND j.trigger = 'chat'
             AND (j.created_at >= $3 OR j.id = $2)`;
}

/** The person whose budget the job spends; null for an app's job or a conversation nobody owns. */
export async function jobSpender(db: Queryable, jobId: number): Promise<SpenderKey | null> {
  const [row] = await queryRows(
    db,
    `SELECT ${SPENDER_OF_JOB} AS spender FROM jobs j LEFT JOIN conversations c ON c.id = j.conversation_id
      WHERE j.id = $1`,
    [jobId],
    z.object({ spender: z.string().nullable() }),
    `the spender of job ${jobId}`,
  );
  const spender = row?.spender ?? null;
  return spender?.startsWith("app:") ? null : spender;
}

/** A sum of cost_usd, as spentBySpender and spentSince (jobs.ts) select it. */
export const Spent = z.object({ spent: numeric });

/** What the spender's jobs created since `since` cost, in every repository and on scratch. */
export async function spentBySpender(db: Queryable, key: SpenderKey, since: Date): Promise<number> {
  const [row] = await queryRows(
    db,
    `SELECT coalesce(sum(cost_usd), 0) AS spent FROM (${spenderJobs(key)}) p`,
    [key, null, since],
    Spent,
    "a spender's spending",
  );
  return row?.spent ?? 0;
}
