// A conversation's images live in conversation_images, once each; the messages and the compaction
// hold references and read back as the model API takes them.
import type Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getCompaction, saveCompaction } from "../../src/store/compactions.ts";
import type { Database } from "../../src/store/database.ts";
import { appendMessage, listMessages } from "../../src/store/messages.ts";
import { PNG } from "../helpers/asset-server.ts";
import { databases, seedConversation } from "../helpers/db.ts";

const image: Anthropic.ImageBlockParam = {
  type: "image",
  source: { type: "base64", media_type: "image/png", data: PNG.toString("base64") },
};
const turn: Anthropic.MessageParam = {
  role: "user",
  content: [{ type: "text", text: "What is this?" }, image],
};

describe.each(databases())("conversation images on $name", (target) => {
  let db: Database;
  beforeAll(async () => {
    db = await target.open();
  });
  afterAll(async () => {
    await db.close();
  });

  const raw = async (sql: string, conversationId: number) =>
    (await db.pool.query(sql, [conversationId])).rows.map((row) => Object.values(row)[0]);

  it("stores an image once per conversation, messages and compaction holding references", async () => {
    const { conversation } = await seedConversation(db);
    await appendMessage(db.pool, { conversationId: conversation.id, ...turn });
    await appendMessage(db.pool, {
      conversationId: conversation.id,
      role: "assistant",
      content: "A pixel.",
    });
    await appendMessage(db.pool, { conversationId: conversation.id, ...turn });
    await saveCompaction(db.pool, conversation.id, { coveredMessages: 3, messages: [turn] });

    expect(
      await raw(
        "SELECT count(*)::int FROM conversation_images WHERE conversation_id = $1",
        conversation.id,
      ),
    ).toEqual([1]);
    const [sha256] = await raw(
      "SELECT sha256 FROM conversation_images WHERE conversation_id = $1",
      conversation.id,
    );
    const reference = {
      type: "image",
      source: { type: "chat_image", media_type: "image/png", sha256 },
    };
    const contents = await raw(
      "SELECT content FROM messages WHERE conversation_id = $1 ORDER BY seq",
      conversation.id,
    );
    expect(contents[0]).toEqual([{ type: "text", text: "What is this?" }, reference]);
    const [compacted] = await raw(
      "SELECT messages FROM conversation_compactions WHERE conversation_id = $1",
      conversation.id,
    );
    expect(compacted).toEqual([
      { role: "user", content: [{ type: "text", text: "What is this?" }, reference] },
    ]);

    const messages = await listMessages(db.pool, conversation.id);
    expect(messages.map((m) => m.content)).toEqual([turn.content, "A pixel.", turn.content]);
    expect(await getCompaction(db.pool, conversation.id)).toEqual({
      coveredMessages: 3,
      messages: [turn],
    });
  });

  it("keeps each conversation's images to itself", async () => {
    const first = await seedConversation(db);
    const second = await seedConversation(db);
    await appendMessage(db.pool, { conversationId: first.conversation.id, ...turn });
    await appendMessage(db.pool, { conversationId: second.conversation.id, ...turn });
    expect(
      await raw(
        "SELECT count(*)::int FROM conversation_images WHERE conversation_id = $1",
        second.conversation.id,
      ),
    ).toEqual([1]);
    expect((await listMessages(db.pool, second.conversation.id))[0]?.content).toEqual(turn.content);
  });
});
