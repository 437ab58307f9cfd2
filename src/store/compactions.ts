import { z } from "zod";
import { loadImages, storeImages } from "./conversation-images.ts";
import { messageParamSchema } from "./message-param.ts";
import type { Queryable } from "./sql.ts";
import { parseStored, row } from "./stored-value.ts";

const CompactionRow = row({
  /** How many of the conversation's stored messages, oldest first, `messages` stand for. */
  covered_messages: z.number().int(),
  messages: z.array(messageParamSchema),
});
export type Compaction = z.output<typeof CompactionRow>;

/** The messages as stored: their images are references (conversation-images.ts). */
const StoredMessages = z.object({ messages: z.array(z.looseObject({ content: z.unknown() })) });

export async function saveCompaction(
  db: Queryable,
  conversationId: number,
  compaction: Compaction,
): Promise<void> {
  // Images stay in conversation_images; the compaction holds references, like the messages.
  const messages = [];
  for (const message of compaction.messages) {
    messages.push({ ...message, content: await storeImages(db, conversationId, message.content) });
  }
  await db.query(
    `INSERT INTO conversation_compactions (conversation_id, covered_messages, messages) VALUES ($1, $2, $3)
     ON CONFLICT (conversation_id) DO UPDATE
       SET covered_messages = EXCLUDED.covered_messages, messages = EXCLUDED.messages,
           created_at = now()
     WHERE conversation_compactions.covered_messages <= EXCLUDED.covered_messages`,
    [conversationId, compaction.coveredMessages, JSON.stringify(messages)],
  );
}

export async function getCompaction(
  db: Queryable,
  conversationId: number,
): Promise<Compaction | undefined> {
  const { rows } = await db.query(
    "SELECT covered_messages, messages FROM conversation_compactions WHERE conversation_id = $1",
    [conversationId],
  );
  if (rows[0] === undefined) return undefined;
  const where = `the conversation_compactions row of conversation ${conversationId}`;
  const stored = parseStored(StoredMessages, rows[0], where).messages;
  const contents = await loadImages(
    db,
    conversationId,
    stored.map((m) => m.content),
  );
  const messages = stored.map((message, i) => ({ ...message, content: contents[i] }));
  return parseStored(CompactionRow, { ...rows[0], messages }, where);
}
