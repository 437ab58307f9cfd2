// Which stored turn a request continues: the longest part of the history that ends at a reply
// vmpilot gave, found in one query however long the history (a 2,000-message history once cost a
// query per reply in it).
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Principal } from "../../src/chat/auth.ts";
import { planTurn } from "../../src/chat/conversation.ts";
import { extendHash } from "../../src/jobs/chat-reply/history-hash.ts";
import { createApiConversation, saveChatTurn } from "../../src/store/api-conversations.ts";
import type { Database } from "../../src/store/database.ts";
import { insertJob } from "../../src/store/jobs.ts";
import { databases } from "../helpers/db.ts";

const MONA: Principal = { kind: "user", id: 5, login: "mona" };
const SCRATCH = { id: "vmpilot", repository: null };

describe.each(databases())("planTurn on $name", (target) => {
  let db: Database;

  beforeAll(async () => {
    db = await target.open();
  });

  afterAll(async () => {
    await db?.close();
  });

  /** A chat of mona's whose one turn ended at this history. */
  async function storedTurn(history: { role: "user" | "assistant"; text: string }[]) {
    const conversation = await createApiConversation(db.pool, { owner: MONA, repositoryId: null });
    const job = await insertJob(db.pool, {
      conversationId: conversation.id,
      installationId: null,
      repositoryId: null,
      repo: "scratch",
      number: null,
      trigger: "chat",
      requester: "mona",
    });
    await saveChatTurn(db.pool, {
      conversationId: conversation.id,
      jobId: job.id,
      historyHash: history.reduce(extendHash, ""),
      messageCount: 0,
      commitSha: null,
      bundle: null,
    });
    return conversation;
  }

  it("finds the turn at the start of a 2,000-message history in a bounded number of queries", async () => {
    const conversation = await storedTurn([
      { role: "user", text: "hello" },
      { role: "assistant", text: "hi there" },
    ]);
    const messages = [
      { role: "user" as const, content: "hello" },
      { role: "assistant" as const, content: "hi there" },
    ];
    for (let i = 0; i < 999; i++) {
      messages.push({ role: "user", content: `q${i}` }, { role: "assistant", content: `a${i}` });
    }
    messages.push({ role: "user", content: "and now?" });
    const queries = vi.spyOn(db.pool, "query");
    try {
      const plan = await planTurn(db.pool, MONA, SCRATCH, { model: "vmpilot", messages }, null);
      expect(plan.conversation.id).toBe(conversation.id);
      // The 1,998 messages after the turn come along as the client's context.
      expect(plan.transcript).toContain("q998");
      // The match, the conversation, its last turn.
      expect(queries).toHaveBeenCalledTimes(3);
    } finally {
      queries.mockRestore();
    }
  });

  it("takes the longest history that ends at a turn, and no one else's turn", async () => {
    const first = [
      { role: "user" as const, text: "one" },
      { role: "assistant" as const, text: "1" },
    ];
    const second = [
      ...first,
      { role: "user" as const, text: "two" },
      { role: "assistant" as const, text: "2" },
    ];
    await storedTurn(first);
    const longer = await storedTurn(second);
    const messages = [
      ...second.map((m) => ({ role: m.role, content: m.text })),
      { role: "user" as const, content: "three" },
    ];
    const plan = await planTurn(db.pool, MONA, SCRATCH, { model: "vmpilot", messages }, null);
    expect(plan.conversation.id).toBe(longer.id);
    expect(plan.transcript).toBe("");
    // The same words from someone else start their own chat.
    const other: Principal = { kind: "user", id: 6, login: "mona" };
    const theirs = await planTurn(db.pool, other, SCRATCH, { model: "vmpilot", messages }, null);
    expect(theirs.conversation.id).not.toBe(longer.id);
    expect(theirs.conversation.owner).toEqual({ kind: "user", id: 6, login: "mona" });
  });
});
