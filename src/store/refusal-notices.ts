import type { Queryable } from "./sql.ts";

/**
 * Claims the right to post a refusal to `login` on the conversation's item: true when none was
 * posted in the last hour, or when the earlier claim was this job's own (a retried attempt must
 * still post). One statement, so concurrent workers cannot both win.
 */
export async function claimRefusalNotice(
  db: Queryable,
  input: { conversationId: number; login: string; jobId: number },
): Promise<boolean> {
  const { rows } = await db.query(
    `INSERT INTO refusal_notices (conversation_id, login, job_id) VALUES ($1, $2, $3)
     ON CONFLICT (conversation_id, login) DO UPDATE SET job_id = EXCLUDED.job_id, sent_at = now()
     WHERE refusal_notices.job_id = EXCLUDED.job_id
        OR refusal_notices.sent_at <= now() - interval '1 hour'
     RETURNING job_id`,
    [input.conversationId, input.login.toLowerCase(), input.jobId],
  );
  return rows.length > 0;
}
