// The conversations whose pull request a push to its base branch may leave conflicting, and who
// asked for their work.
import { z } from "zod";
import type { JobTrigger } from "./jobs.ts";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored } from "./stored-value.ts";

/** Triggers a person wrote; the app's own jobs run on behalf of the last of them. */
const PERSON_TRIGGERS: readonly JobTrigger[] = [
  "label",
  "assigned",
  "mention",
  "command",
  "review",
  "review_comment",
];

export interface PullRequestConversation {
  conversationId: number;
  prNumber: number;
  branch: string;
  /** The person who last asked for work in the conversation, and that job's stored context. */
  requester: string;
  context: unknown;
  jobId: number;
}

const row = z.object({
  id: bigint,
  pr_number: z.number().int(),
  branch: z.string(),
  requester: z.string(),
  context: z.unknown(),
  job_id: bigint,
});

/**
 * A repository's conversations with a pull request from a branch under `prefix`, not known closed.
 */
export async function pullRequestConversations(
  db: Queryable,
  repositoryId: number,
  prefix: string,
): Promise<PullRequestConversation[]> {
  const { rows } = await db.query(
    `SELECT c.id, c.pr_number, c.branch, j.requester, j.context, j.id AS job_id FROM conversations c
     CROSS JOIN LATERAL (SELECT id, requester, context FROM jobs
                         WHERE conversation_id = c.id AND trigger = ANY($3) ORDER BY id DESC LIMIT 1) j
     WHERE c.repository_id = $1 AND c.pr_number IS NOT NULL AND c.pr_closed_at IS NULL
       AND starts_with(c.branch, $2)
     ORDER BY c.id`,
    [repositoryId, prefix, PERSON_TRIGGERS],
  );
  return rows.map((value) => {
    const conversation = parseStored(row, value, "a conversations row with its last job");
    return {
      conversationId: conversation.id,
      prNumber: conversation.pr_number,
      branch: conversation.branch,
      requester: conversation.requester,
      context: conversation.context,
      jobId: conversation.job_id,
    };
  });
}

/** The conversation's pull request was found closed: pushes to its base no longer concern it. */
export async function markPullRequestClosed(db: Queryable, conversationId: number): Promise<void> {
  await db.query("UPDATE conversations SET pr_closed_at = now() WHERE id = $1", [conversationId]);
}
