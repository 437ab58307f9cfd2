import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../src/store/database.ts";
import { insertJob, updateJob } from "../../src/store/jobs.ts";
import { usageByDay } from "../../src/web/queries.ts";
import { databases, newJob, seedChat } from "../helpers/db.ts";

describe.each(databases())("usageByDay on $name", (target) => {
  let db: Database;
  beforeAll(async () => {
    db = await target.open();
  });
  afterAll(async () => {
    await db.close();
  });

  async function job(repositoryId: number, daysAgo: number, costUsd: number, inputTokens: number) {
    const { chat } = await seedChat(db, repositoryId);
    const created = await insertJob(db.pool, newJob(chat));
    await updateJob(db.pool, created.id, {
      costUsd,
      usage: {
        inputTokens,
        outputTokens: 10,
        cacheReadInputTokens: 5,
        cacheCreationInputTokens: 1,
      },
    });
    await db.pool.query(
      `UPDATE jobs SET created_at = (date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 hour'
         - make_interval(days => $2)) AT TIME ZONE 'UTC' WHERE id = $1`,
      [created.id, daysAgo],
    );
  }

  it("sums tokens and cost per repository per UTC day over the window", async () => {
    await job(1, 0, 0.5, 100);
    await job(1, 0, 0.25, 50);
    await job(2, 0, 1, 1);
    await job(1, 29, 2, 7);
    await job(1, 30, 99, 99); // outside the 30 days
    await job(3, 0, 99, 99); // a repository the viewer cannot read
    const today = new Date().toISOString().slice(0, 10);
    const rows = await usageByDay(db.pool, [1, 2], 30);
    expect(rows).toEqual([
      {
        day: today,
        repo: "acme/repo-1",
        jobs: 2,
        inputTokens: 150,
        outputTokens: 20,
        cacheTokens: 12,
        costUsd: 0.75,
      },
      {
        day: today,
        repo: "acme/repo-2",
        jobs: 1,
        inputTokens: 1,
        outputTokens: 10,
        cacheTokens: 6,
        costUsd: 1,
      },
      {
        day: new Date(Date.now() - 29 * 86_400_000).toISOString().slice(0, 10),
        repo: "acme/repo-1",
        jobs: 1,
        inputTokens: 7,
        outputTokens: 10,
        cacheTokens: 6,
        costUsd: 2,
      },
    ]);
    expect(await usageByDay(db.pool, [], 30)).toEqual([]);
  });

  it("counts the viewer's scratch chats as one more row, and nobody else's", async () => {
    for (const [owner, id] of [
      ["mona", 5],
      ["hubot", 6],
    ] as const) {
      const { rows } = await db.pool.query<{ id: string }>(
        "INSERT INTO chats (kind, api_owner, api_owner_id) VALUES ('api', $1, $2) RETURNING id",
        [owner, id],
      );
      await db.pool.query(
        `INSERT INTO jobs (chat_id, repo, trigger, requester, cost_usd, usage)
         VALUES ($1, 'scratch', 'chat', $2, 0.5, '{"inputTokens": 3, "outputTokens": 2}')`,
        [rows[0]?.id, owner],
      );
    }
    const rows = await usageByDay(db.pool, [], 30, 5);
    expect(rows).toEqual([
      expect.objectContaining({ repo: "scratch", jobs: 1, inputTokens: 3, costUsd: 0.5 }),
    ]);
  });
});
