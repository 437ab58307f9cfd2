import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored, row } from "./stored-value.ts";

const ConversationRow = row({
  id: bigint,
  repository_id: bigint,
  /** The issue or pull request the conversation started on. */
  number: z.number().int(),
  kind: z.enum(["issue", "pull_request"]),
  /**
   * The pull request a conversation started on an issue opened and follows into; null until then,
   * and for a conversation started on a pull request (its number is that pull request).
   */
  pr_number: z.number().int().nullable(),
  branch: z.string().nullable(),
  message_count: z.number().int(),
  created_at: z.date(),
  updated_at: z.date(),
});
export type Conversation = z.output<typeof ConversationRow>;
export type ConversationKind = Conversation["kind"];

function toConversation(value: unknown): Conversation {
  return parseStored(ConversationRow, value, "a conversations row");
}

/**
 * The key the queue serializes on: one running job per conversation. Its prefix is the one queued
 * entries already hold, so jobs queued before and after an upgrade still wait for each other.
 */
export function conversationKey(conversationId: number): string {
  return `chat:${conversationId}`;
}

export async function getConversation(
  db: Queryable,
  id: number,
): Promise<Conversation | undefined> {
  const { rows } = await db.query("SELECT * FROM conversations WHERE id = $1", [id]);
  return rows[0] && toConversation(rows[0]);
}

/**
 * The conversation for an issue or pull request number. A pull request opened from an issue's
 * conversation finds that conversation, so it carries on.
 */
export async function findConversation(
  db: Queryable,
  repositoryId: number,
  number: number,
): Promise<Conversation | undefined> {
  const { rows } = await db.query(
    `SELECT * FROM conversations WHERE repository_id = $1 AND (pr_number = $2 OR number = $2)
     ORDER BY pr_number = $2 DESC NULLS LAST LIMIT 1`,
    [repositoryId, number],
  );
  return rows[0] && toConversation(rows[0]);
}

export async function findOrCreateConversation(
  db: Queryable,
  input: { repositoryId: number; number: number; kind: ConversationKind },
): Promise<Conversation> {
  const existing = await findConversation(db, input.repositoryId, input.number);
  if (existing) return existing;
  const { rows } = await db.query(
    `INSERT INTO conversations (repository_id, number, kind) VALUES ($1, $2, $3)
     ON CONFLICT (repository_id, number) DO NOTHING RETURNING *`,
    [input.repositoryId, input.number, input.kind],
  );
  if (rows[0]) return toConversation(rows[0]);
  // Another request created it between our lookup and insert.
  const created = await findConversation(db, input.repositoryId, input.number);
  if (!created) throw new Error(`conversation ${input.repositoryId}#${input.number} vanished`);
  return created;
}

/**
 * A scheduled automation run's conversation: on the repository, on no issue or pull request, so
 * no trigger on an item ever finds it. Resolves to its id.
 */
export async function createAutomationConversation(
  db: Queryable,
  repositoryId: number,
): Promise<number> {
  const { rows } = await db.query(
    "INSERT INTO conversations (repository_id, kind) VALUES ($1, 'automation') RETURNING id",
    [repositoryId],
  );
  return parseStored(z.object({ id: bigint }), rows[0], "a new conversations row").id;
}

/**
 * Records the pull request a conversation opened, so triggers on that pull request resume the
 * conversation.
 */
export async function linkConversationToPr(
  db: Queryable,
  conversationId: number,
  prNumber: number,
  branch?: string,
): Promise<void> {
  await db.query(
    `UPDATE conversations SET pr_number = $2, branch = coalesce($3, branch), pr_closed_at = NULL,
       updated_at = now()
     WHERE id = $1`,
    [conversationId, prNumber, branch ?? null],
  );
}
