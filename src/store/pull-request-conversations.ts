// The conversations whose pull request a push to its base branch may leave conflicting, and who
// asked for their work.
import { z } from "zod";
import type { JobTrigger } from "./jobs.ts";
import type { Queryable } from "./sql.ts";
import { bigint, queryRows, row } from "./stored-value.ts";

/** Triggers a person wrote; the app's own jobs run on behalf of the last of them. */
const PERSON_TRIGGERS: readonly JobTrigger[] = [
  "label",
  "assigned",
  "mention",
  "command",
  "review",
  "review_comment",
];

const PullRequestConversationRow = row({
  conversation_id: bigint,
  pr_number: z.number().int(),
  branch: z.string(),
  /** The person who last asked for work in the conversation, and that job's stored context. */
  requester: z.string(),
  context: z.unknown(),
  job_id: bigint,
});
export type PullRequestConversation = z.output<typeof PullRequestConversationRow>;

/**
 * A repository's conversations with a pull request from a branch under `prefix`, not known closed.
 */
export async function pullRequestConversations(
  db: Queryable,
  repositoryId: number,
  prefix: string,
): Promise<PullRequestConversation[]> {
  return queryRows(
    db,
    `SELECT c.id AS conversation_id, c.pr_number, c.branch, j.requester, j.context, j.id AS job_id FROM conversations c
     CROSS JOIN LATERAL (SELECT id, requester, context FROM jobs
                         WHERE conversation_id = c.id AND trigger = ANY($3) ORDER BY id DESC LIMIT 1) j
     WHERE c.repository_id = $1 AND c.pr_number IS NOT NULL AND c.pr_closed_at IS NULL
       AND starts_with(c.branch, $2)
     ORDER BY c.id`,
    [repositoryId, prefix, PERSON_TRIGGERS],
    PullRequestConversationRow,
    "conversations rows with their last jobs",
  );
}

/** The conversation's pull request was found closed: pushes to its base no longer concern it. */
export async function markPullRequestClosed(db: Queryable, conversationId: number): Promise<void> {
  await db.query("UPDATE conversations SET pr_closed_at = now() WHERE id = $1", [conversationId]);
}
