// Migration 023 renames the stored threads from chats to conversations: a database holding one at
// the version before finds it after, with its messages, images, compaction, jobs, turns and
// notices, and its new rows still numbered after the old ones.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../src/store/database.ts";
import { loadMigrations, migrate } from "../../src/store/migrate.ts";
import { databases } from "../helpers/db.ts";

describe.each(databases())("migration 023 on $name", (target) => {
  let db: Database;
  let before: { conversation: string; job: string };
  beforeAll(async () => {
    db = await target.open({ migrate: false });
    const all = await loadMigrations();
    await migrate(db.pool, { migrations: all.filter((m) => m.version < 23) });
    const one = async (sql: string, params: unknown[] = []) =>
      String((await db.pool.query<{ id: string }>(sql, params)).rows[0]?.id);
    await db.pool.query(
      `INSERT INTO installations (id, account_login) VALUES (77, 'acme');
       INSERT INTO repositories (id, installation_id, full_name) VALUES (1001, 77, 'acme/app')`,
    );
    const conversation = await one(
      `INSERT INTO chats (repository_id, number, kind, pr_number, branch, message_count)
       VALUES (1001, 5, 'issue', 6, 'vmpilot/issue-5', 1) RETURNING id`,
    );
    const job = await one(
      `INSERT INTO jobs (chat_id, installation_id, repository_id, repo, number, trigger, requester)
       VALUES ($1, 77, 1001, 'acme/app', 5, 'label', 'octocat') RETURNING id`,
      [conversation],
    );
    for (const sql of [
      "INSERT INTO messages (chat_id, seq, role, content) VALUES ($1, 1, 'user', '\"fix it\"')",
      "INSERT INTO chat_images (chat_id, sha256, media_type, data) VALUES ($1, 'abc', 'image/png', '\\x01')",
      "INSERT INTO chat_compactions (chat_id, covered_messages, messages) VALUES ($1, 1, '[]')",
      "INSERT INTO refusal_notices (chat_id, login, job_id) VALUES ($1, 'mallory', $2)",
      `INSERT INTO chat_turns (chat_id, turn, job_id, history_hash, message_count)
       VALUES ($1, 1, $2, 'h1', 1)`,
    ]) {
      await db.pool.query(sql, sql.includes("$2") ? [conversation, job] : [conversation]);
    }
    await one(
      `INSERT INTO chats (kind, api_owner, api_owner_id, client_chat_id)
       VALUES ('api', 'alice', 501, 'webui-1') RETURNING id`,
    );
    before = { conversation, job };
    expect(await migrate(db.pool)).toEqual(
      all.filter((m) => m.version >= 23).map((m) => m.version),
    );
  });
  afterAll(async () => {
    await db?.close();
  });

  const rows = async (sql: string, params: unknown[] = []) =>
    (await db.pool.query(sql, params)).rows;

  it("finds the conversation and everything that points at it under the new names", async () => {
    const id = before.conversation;
    expect(
      await rows("SELECT number, pr_number, branch FROM conversations WHERE id = $1", [id]),
    ).toEqual([{ number: 5, pr_number: 6, branch: "vmpilot/issue-5" }]);
    expect(await rows("SELECT id::text FROM jobs WHERE conversation_id = $1", [id])).toEqual([
      { id: before.job },
    ]);
    for (const table of [
      "messages",
      "conversation_images",
      "conversation_compactions",
      "refusal_notices",
      "chat_turns",
    ]) {
      expect(
        await rows(`SELECT count(*)::int AS n FROM ${table} WHERE conversation_id = $1`, [id]),
      ).toEqual([{ n: 1 }]);
    }
    expect(
      await rows("SELECT client_conversation_id FROM conversations WHERE kind = 'api'"),
    ).toEqual([{ client_conversation_id: "webui-1" }]);
  });

  it("keeps the constraints: one conversation per item, references checked, ids counting on", async () => {
    await expect(
      db.pool.query(
        "INSERT INTO conversations (repository_id, number, kind) VALUES (1001, 5, 'issue')",
      ),
    ).rejects.toThrow(/conversations_repository_id_number_key/);
    await expect(
      db.pool.query(
        "INSERT INTO messages (conversation_id, seq, role, content) VALUES (-1, 1, 'user', '1')",
      ),
    ).rejects.toThrow(/messages_conversation_id_fkey/);
    const [next] = await rows(
      "INSERT INTO conversations (repository_id, number, kind) VALUES (1001, 7, 'issue') RETURNING id::int",
    );
    expect(next?.id).toBeGreaterThan(Number(before.conversation));
  });
});
