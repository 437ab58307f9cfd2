import type Anthropic from "@anthropic-ai/sdk";
import { z } from "zod";
import { loadImages, storeImages } from "./chat-images.ts";
import { messageParamSchema } from "./message-param.ts";
import type { Queryable } from "./sql.ts";
import { parseStored } from "./stored-value.ts";

export interface Compaction {
  /** How many of the chat's stored messages, oldest first, `messages` stand for. */
  coveredMessages: number;
  messages: Anthropic.MessageParam[];
}

const compactionRow = z.object({
  covered_messages: z.number().int(),
  messages: z.array(z.looseObject({ content: z.unknown() })),
});

export async function saveCompaction(
  db: Queryable,
  chatId: number,
  compaction: Compaction,
): Promise<void> {
  // Images stay in chat_images; the compaction holds references, like the messages.
  const messages = [];
  for (const message of compaction.messages) {
    messages.push({ ...message, content: await storeImages(db, chatId, message.content) });
  }
  await db.query(
    `INSERT INTO chat_compactions (chat_id, covered_messages, messages) VALUES ($1, $2, $3)
     ON CONFLICT (chat_id) DO UPDATE
       SET covered_messages = EXCLUDED.covered_messages, messages = EXCLUDED.messages,
           created_at = now()
     WHERE chat_compactions.covered_messages <= EXCLUDED.covered_messages`,
    [chatId, compaction.coveredMessages, JSON.stringify(messages)],
  );
}

export async function getCompaction(
  db: Queryable,
  chatId: number,
): Promise<Compaction | undefined> {
  const { rows } = await db.query(
    "SELECT covered_messages, messages FROM chat_compactions WHERE chat_id = $1",
    [chatId],
  );
  if (rows[0] === undefined) return undefined;
  const where = `the chat_compactions row of chat ${chatId}`;
  const row = parseStored(compactionRow, rows[0], where);
  const contents = await loadImages(
    db,
    chatId,
    row.messages.map((m) => m.content),
  );
  const messages = row.messages.map((message, i) => ({ ...message, content: contents[i] }));
  return {
    coveredMessages: row.covered_messages,
    messages: parseStored(z.array(messageParamSchema), messages, where),
  };
}
