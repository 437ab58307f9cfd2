import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clearRegisteredSecrets, REDACTED, registerSecret } from "../../src/log/redact.ts";
import {
  findConversation,
  findOrCreateConversation,
  getConversation,
  linkConversationToPr,
} from "../../src/store/conversations.ts";
import type { Database } from "../../src/store/database.ts";
import { upsertRepository } from "../../src/store/installations.ts";
import { appendMessage, listMessages } from "../../src/store/messages.ts";
import { withTransaction } from "../../src/store/sql.ts";
import { databases, seedConversation } from "../helpers/db.ts";

describe.each(databases())("conversations and messages on $name", (target) => {
  let db: Database;
  beforeAll(async () => {
    db = await target.open();
    await upsertRepository(db.pool, { id: 500, installationId: 9, fullName: "acme/widgets" });
  });
  afterAll(async () => {
    await db.close();
  });

  it("gives each issue one conversation, even when created concurrently", async () => {
    const conversations = await Promise.all(
      Array.from({ length: 8 }, () =>
        findOrCreateConversation(db.pool, { repositoryId: 500, number: 7, kind: "issue" }),
      ),
    );
    expect(new Set(conversations.map((c) => c.id)).size).toBe(1);
    expect(conversations[0]).toMatchObject({
      repositoryId: 500,
      number: 7,
      kind: "issue",
      prNumber: null,
    });
    const other = await findOrCreateConversation(db.pool, {
      repositoryId: 500,
      number: 8,
      kind: "issue",
    });
    expect(other.id).not.toBe(conversations[0]?.id);
  });

  it("follows an issue's conversation into the pull request it opened", async () => {
    const issueConversation = await findOrCreateConversation(db.pool, {
      repositoryId: 500,
      number: 20,
      kind: "issue",
    });
    expect(await findConversation(db.pool, 500, 21)).toBeUndefined();
    await linkConversationToPr(db.pool, issueConversation.id, 21, "vmpilot/issue-20-fix-it");

    const fromPr = await findOrCreateConversation(db.pool, {
      repositoryId: 500,
      number: 21,
      kind: "pull_request",
    });
    expect(fromPr.id).toBe(issueConversation.id);
    expect(fromPr).toMatchObject({ number: 20, prNumber: 21, branch: "vmpilot/issue-20-fix-it" });

    const standalonePr = await findOrCreateConversation(db.pool, {
      repositoryId: 500,
      number: 30,
      kind: "pull_request",
    });
    expect(standalonePr).toMatchObject({ number: 30, kind: "pull_request", prNumber: null });
  });

  it("numbers appended messages in order and round-trips their content", async () => {
    const { conversation } = await seedConversation(db, 500);
    const blocks = [
      { type: "text", text: "héllo \u202e wörld" },
      { type: "tool_use", id: "t1", name: "bash", input: { command: "ls" } },
    ];
    const first = await appendMessage(db.pool, {
      conversationId: conversation.id,
      role: "user",
      content: "fix",
    });
    const second = await appendMessage(db.pool, {
      conversationId: conversation.id,
      role: "assistant",
      content: blocks,
    });
    expect([first.seq, second.seq]).toEqual([1, 2]);
    const messages = await listMessages(db.pool, conversation.id);
    expect(messages.map((m) => [m.seq, m.role, m.content])).toEqual([
      [1, "user", "fix"],
      [2, "assistant", blocks],
    ]);
    expect(await listMessages(db.pool, conversation.id, 1)).toHaveLength(1);
    expect((await getConversation(db.pool, conversation.id))?.messageCount).toBe(2);
  });

  it("hands out distinct, gap-free seqs to concurrent appends", async () => {
    const { conversation } = await seedConversation(db, 500);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        appendMessage(db.pool, { conversationId: conversation.id, role: "user", content: { i } }),
      ),
    );
    const seqs = (await listMessages(db.pool, conversation.id)).map((m) => m.seq);
    expect(seqs).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  });

  it("stores messages with known and registered secrets redacted", async () => {
    const { conversation } = await seedConversation(db, 500);
    registerSecret("the-webhook-secret-value");
    try {
      const token = `ghs_${"a1B2".repeat(9)}`;
      await appendMessage(db.pool, {
        conversationId: conversation.id,
        role: "user",
        content: [
          {
            type: "tool_result",
            content: [{ type: "text", text: `env: ${token} the-webhook-secret-value` }],
          },
        ],
      });
      const [message] = await listMessages(db.pool, conversation.id);
      expect(message?.content).toEqual([
        { type: "tool_result", content: [{ type: "text", text: `env: ${REDACTED} ${REDACTED}` }] },
      ]);
    } finally {
      clearRegisteredSecrets();
    }
  });

  it("never rewrites history", async () => {
    const { conversation } = await seedConversation(db, 500);
    await appendMessage(db.pool, {
      conversationId: conversation.id,
      role: "user",
      content: "original",
    });
    await expect(
      db.pool.query("UPDATE messages SET content = '\"edited\"' WHERE conversation_id = $1", [
        conversation.id,
      ]),
    ).rejects.toThrow(/append-only/);
    const [message] = await listMessages(db.pool, conversation.id);
    expect(message?.content).toBe("original");
  });

  it("rolls an append back with its transaction, leaving no gap", async () => {
    const { conversation } = await seedConversation(db, 500);
    await expect(
      withTransaction(db.pool, async (client) => {
        await appendMessage(client, {
          conversationId: conversation.id,
          role: "user",
          content: "lost",
        });
        throw new Error("crash");
      }),
    ).rejects.toThrow("crash");
    const kept = await appendMessage(db.pool, {
      conversationId: conversation.id,
      role: "user",
      content: "kept",
    });
    expect(kept.seq).toBe(1);
  });

  it("refuses a message for a conversation that does not exist", async () => {
    await expect(
      appendMessage(db.pool, { conversationId: 999_999, role: "user", content: "x" }),
    ).rejects.toThrow(/no conversation/);
  });
});
