// What vmpilot keeps of its own pull requests after they open: the head it pushed last and the job
// that pushed it (CI fixes act only on that head), the head it marked ready for review, and whether
// it said that the CI fix attempts ran out.
import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored, row } from "./stored-value.ts";

/** Records a push of vmpilot's to the conversation's own branch. */
export async function recordPush(
  db: Queryable,
  conversationId: number,
  sha: string,
  jobId: number,
): Promise<void> {
  await db.query(
    `UPDATE conversations SET last_pushed_sha = $2, last_push_job_id = $3, updated_at = now()
     WHERE id = $1`,
    [conversationId, sha, jobId],
  );
}

const PushedRow = z.object({
  conversation_id: bigint,
  pr_number: z.number().int(),
  job_id: bigint,
  requester: z.string(),
  context: z.record(z.string(), z.unknown()),
});
export type PushedConversation = z.output<typeof PushedRow>;

/**
 * The conversation whose pull request (one of `prNumbers`, or any when the event names none) has
 * one of `branches` at the head vmpilot pushed last, with the job that pushed it; undefined when
 * that head is not vmpilot's.
 */
export async function findPushedConversation(
  db: Queryable,
  query: { repositoryId: number; prNumbers: number[] | null; branches: string[]; sha: string },
): Promise<PushedConversation | undefined> {
  const { rows } = await db.query(
    `SELECT c.id AS conversation_id, c.pr_number, j.id AS job_id, j.requester, j.context
       FROM conversations c JOIN jobs j ON j.id = c.last_push_job_id
      WHERE c.repository_id = $1 AND c.pr_number IS NOT NULL
        AND ($2::int[] IS NULL OR c.pr_number = ANY($2::int[])) AND c.branch = ANY($3::text[])
        AND c.last_pushed_sha = $4
      LIMIT 1`,
    [query.repositoryId, query.prNumbers, query.branches, query.sha],
  );
  return rows[0] && parseStored(PushedRow, rows[0], "a pushed conversation");
}

const PushState = row({ sha: z.string().nullable(), job_id: bigint.nullable() });

export async function pushState(
  db: Queryable,
  conversationId: number,
): Promise<z.output<typeof PushState>> {
  const { rows } = await db.query(
    "SELECT last_pushed_sha AS sha, last_push_job_id AS job_id FROM conversations WHERE id = $1",
    [conversationId],
  );
  return parseStored(PushState, rows[0] ?? {}, `conversations row ${conversationId}`);
}

/** CI fix jobs of the conversation before `beforeJobId` that went ahead (were not dropped). */
export async function ciFixAttempts(
  db: Queryable,
  conversationId: number,
  beforeJobId: number,
): Promise<number> {
  const { rows } = await db.query(
    `SELECT count(*) AS n FROM jobs WHERE conversation_id = $1 AND trigger = 'ci' AND id < $2
        AND status NOT IN ('ignored', 'refused', 'queued')`,
    [conversationId, beforeJobId],
  );
  return parseStored(z.object({ n: bigint }), rows[0], "a count of CI fix jobs").n;
}

/** True for the one caller that gets to say, on the pull request, that the attempts ran out. */
export async function claimCapNotice(db: Queryable, conversationId: number): Promise<boolean> {
  const { rowCount } = await db.query(
    "UPDATE conversations SET ci_cap_noticed_at = now() WHERE id = $1 AND ci_cap_noticed_at IS NULL",
    [conversationId],
  );
  return rowCount === 1;
}

/** True for the one caller that gets to mark `sha` ready for review. */
export async function claimReady(
  db: Queryable,
  conversationId: number,
  sha: string,
): Promise<boolean> {
  const { rowCount } = await db.query(
    "UPDATE conversations SET ready_sha = $2 WHERE id = $1 AND ready_sha IS DISTINCT FROM $2",
    [conversationId, sha],
  );
  return rowCount === 1;
}

/** Gives the claim back when marking failed, so a retry may claim it again. */
export async function releaseReady(
  db: Queryable,
  conversationId: number,
  sha: string,
): Promise<void> {
  await db.query("UPDATE conversations SET ready_sha = NULL WHERE id = $1 AND ready_sha = $2", [
    conversationId,
    sha,
  ]);
}

/**
 * Whether a person pushed to vmpilot's branch after it: the pull request's head now is not the
 * commit vmpilot pushed there last. That head is theirs, and vmpilot builds on it no more (a CI
 * fix, the ready check, a merge of the moved base).
 */
export function pushedAfterVmpilot(head: string, pushed: string | null | undefined) {
  return head === pushed ? undefined : "someone pushed to the branch after vmpilot";
}
