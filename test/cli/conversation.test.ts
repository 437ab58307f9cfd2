// The CLI's stored conversations: kept per repository, held by one run at a time, written a turn
// at a time.
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UsageError } from "../../src/cli/args.ts";
import {
  type ConversationChoice,
  HOLDER,
  openConversation,
  releaseConversation,
  saveTurn,
} from "../../src/cli/conversation.ts";
import { getCliConversation, listCliConversations } from "../../src/store/cli-conversations.ts";
import type { Database } from "../../src/store/database.ts";
import { databases } from "../helpers/db.ts";

const REPO = "/home/dev/project";

function fresh(title: string): ConversationChoice {
  return { kind: "new", title, branch: async (taken) => `vmpilot/b${taken.size}` };
}

/** The pid of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn("true");
  await new Promise((resolve) => child.once("exit", resolve));
  return child.pid as number;
}

describe.each(databases())("CLI conversations on $name", (target) => {
  let db: Database;
  beforeAll(async () => {
    db = await target.open();
  });
  afterAll(async () => {
    await db.close();
  });

  it("stores turns with their tool calls and gives them back to the next run", async () => {
    const first = await openConversation(db.pool, REPO, fresh("fix the parser\nmore detail"));
    expect(first.conversation).toMatchObject({
      repo: REPO,
      branch: "vmpilot/b0",
      title: "fix the parser",
    });
    const turn = [
      { role: "user" as const, content: "fix the parser" },
      {
        role: "assistant" as const,
        content: [{ type: "tool_use" as const, id: "t1", name: "bash", input: { command: "ls" } }],
      },
      {
        role: "user" as const,
        content: [{ type: "tool_result" as const, tool_use_id: "t1", content: "src" }],
      },
      { role: "assistant" as const, content: [{ type: "text" as const, text: "done" }] },
    ];
    const saved = await saveTurn(db.pool, first, { messages: turn, costUsd: 0.25 });
    expect(saved).toMatchObject({ turns: 1, costUsd: 0.25, messageCount: 4 });
    await releaseConversation(db.pool, first);

    const again = await openConversation(db.pool, REPO, { kind: "latest" });
    expect(again.conversation.id).toBe(first.conversation.id);
    expect(again.history).toEqual(turn);
    expect(again.storedCount).toBe(4);
    // A compaction during the second turn stands for the first turn and the messages before it.
    await saveTurn(db.pool, again, {
      messages: [
        { role: "user", content: "and the lexer" },
        { role: "assistant", content: [{ type: "text", text: "ok" }] },
      ],
      compaction: { afterMessages: 1, messages: [{ role: "user", content: "summary" }] },
      costUsd: 0.5,
    });
    await releaseConversation(db.pool, again);
    const third = await openConversation(db.pool, REPO, { kind: "id", id: first.conversation.id });
    expect(third.history).toEqual([
      { role: "user", content: "summary" },
      { role: "assistant", content: [{ type: "text", text: "ok" }] },
    ]);
    expect(third.conversation).toMatchObject({ turns: 2, costUsd: 0.75 });
    await releaseConversation(db.pool, third);
  });

  it("refuses a conversation another live run holds, and takes over one whose run died", async () => {
    const held = await openConversation(db.pool, "/srv/held", fresh("a"));
    await saveTurn(db.pool, held, { messages: [{ role: "user", content: "a" }], costUsd: 0 });
    // Held by this very process under another name: a live process on this host.
    await db.pool.query("UPDATE conversations SET locked_by = $2 WHERE id = $1", [
      held.conversation.id,
      `${HOLDER.split(":")[0]}:${process.ppid}`,
    ]);
    const refused = openConversation(db.pool, "/srv/held", { kind: "latest" });
    await expect(refused).rejects.toThrow(UsageError);
    await expect(refused).rejects.toThrow(
      new RegExp(`conversation ${held.conversation.id} is in use by .*:${process.ppid} since`),
    );

    await db.pool.query("UPDATE conversations SET locked_by = $2 WHERE id = $1", [
      held.conversation.id,
      `${HOLDER.split(":")[0]}:${await deadPid()}`,
    ]);
    const taken = await openConversation(db.pool, "/srv/held", { kind: "latest" });
    expect(taken.conversation.lockedBy).toBe(HOLDER);
    await releaseConversation(db.pool, taken);
    expect((await getCliConversation(db.pool, held.conversation.id))?.lockedBy).toBeNull();
  });

  it("names the problem when there is nothing to continue or the id is wrong", async () => {
    await expect(openConversation(db.pool, "/srv/none", { kind: "latest" })).rejects.toThrow(
      "no conversation for /srv/none yet: run without --continue to start one",
    );
    await expect(openConversation(db.pool, REPO, { kind: "id", id: 99_999 })).rejects.toThrow(
      "no conversation 99999: `vmpilot conversations` lists them",
    );
    const other = await openConversation(db.pool, "/srv/other", fresh("x"));
    await saveTurn(db.pool, other, { messages: [{ role: "user", content: "x" }], costUsd: 0 });
    await releaseConversation(db.pool, other);
    await expect(
      openConversation(db.pool, REPO, { kind: "id", id: other.conversation.id }),
    ).rejects.toThrow(`conversation ${other.conversation.id} belongs to /srv/other, not ${REPO}`);
  });

  it("drops a conversation whose run ended before its first message, and avoids taken branches", async () => {
    const kept = await openConversation(db.pool, "/srv/branches", fresh("one"));
    await saveTurn(db.pool, kept, { messages: [{ role: "user", content: "one" }], costUsd: 0 });
    await releaseConversation(db.pool, kept);
    const empty = await openConversation(db.pool, "/srv/branches", fresh("two"));
    expect(empty.conversation.branch).toBe("vmpilot/b1");
    await releaseConversation(db.pool, empty);
    expect((await listCliConversations(db.pool, "/srv/branches")).map((c) => c.id)).toEqual([
      kept.conversation.id,
    ]);
  });
});
