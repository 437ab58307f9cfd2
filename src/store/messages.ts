import { z } from "zod";
import { redactDeep } from "../log/redact.ts";
import { loadImages, storeImages } from "./conversation-images.ts";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored, row } from "./stored-value.ts";

const MessageRow = row({
  conversation_id: bigint,
  /** 1-based position in the conversation. */
  seq: z.number().int(),
  /** The model API's message roles. */
  role: z.enum(["user", "assistant", "system"]),
  /** The message content as the model API takes it: a string or an array of blocks. */
  content: z.unknown(),
  job_id: bigint.nullable(),
  created_at: z.date(),
});
export type Message = z.output<typeof MessageRow>;
export type MessageRole = Message["role"];

function toMessage(value: unknown): Message {
  return parseStored(MessageRow, value, "a messages row");
}

/**
 * Appends one message. The conversation row's counter hands out seq under its row lock, so
 * concurrent appends get distinct, gap-free numbers, and the cost does not grow with the history.
 * Secrets (registered ones and known token shapes) are redacted before the content is stored: tool
 * output read in the sandbox may contain them, and the table outlives the job. Images go to
 * conversation_images, once per conversation; the stored content (and the message returned) holds
 * references.
 */
export async function appendMessage(
  db: Queryable,
  input: { conversationId: number; role: MessageRole; content: unknown; jobId?: number | null },
): Promise<Message> {
  const content = await storeImages(db, input.conversationId, input.content);
  const { rows } = await db.query(
    `WITH next AS (
       UPDATE conversations SET message_count = message_count + 1, updated_at = now()
       WHERE id = $1 RETURNING message_count
     )
     INSERT INTO messages (conversation_id, seq, role, content, job_id)
     SELECT $1, message_count, $2, $3::jsonb, $4 FROM next
     RETURNING *`,
    [input.conversationId, input.role, JSON.stringify(redactDeep(content)), input.jobId ?? null],
  );
  if (!rows[0]) throw new Error(`no conversation ${input.conversationId}`);
  return toMessage(rows[0]);
}

/** Messages in order, images included; afterSeq skips those already loaded. */
export async function listMessages(
  db: Queryable,
  conversationId: number,
  afterSeq = 0,
): Promise<Message[]> {
  const { rows } = await db.query(
    "SELECT * FROM messages WHERE conversation_id = $1 AND seq > $2 ORDER BY seq",
    [conversationId, afterSeq],
  );
  const messages = rows.map(toMessage);
  const contents = await loadImages(
    db,
    conversationId,
    messages.map((m) => m.content),
  );
  return messages.map((message, i) => ({ ...message, content: contents[i] }));
}
