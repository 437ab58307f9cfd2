import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../src/store/database.ts";
import { insertJob, updateJob } from "../../src/store/jobs.ts";
import { usageByDay, usageByPerson } from "../../src/web/queries.ts";
import { databases, newJob, seedConversation } from "../helpers/db.ts";

describe.each(databases())("usageByDay on $name", (target) => {
  let db: Database;
  beforeAll(async () => {
    db = await target.open();
  });
  afterAll(async () => {
    await db.close();
  });

  async function job(repositoryId: number, daysAgo: number, costUsd: number, inputTokens: number) {
    const { conversation } = await seedConversation(db, repositoryId);
    const created = await insertJob(db.pool, newJob(conversation));
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

  it("counts the viewer's scratch conversations as one more row, and nobody else's", async () => {
    for (const [owner, id] of [
      ["mona", 5],
      ["hubot", 6],
    ] as const) {
      const { rows } = await db.pool.query<{ id: string }>(
        "INSERT INTO conversations (kind, api_owner, api_owner_id) VALUES ('api', $1, $2) RETURNING id",
        [owner, id],
      );
      await db.pool.query(
        `INSERT INTO jobs (conversation_id, repo, trigger, requester, cost_usd, usage)
         VALUES ($1, 'scratch', 'chat', $2, 0.5, '{"inputTokens": 3, "outputTokens": 2}')`,
        [rows[0]?.id, owner],
      );
    }
    const rows = await usageByDay(db.pool, [], 30, 5);
    expect(rows).toEqual([
      expect.objectContaining({ repo: "scratch", jobs: 1, inputTokens: 3, costUsd: 0.5 }),
    ]);
  });

  it("sums per person: issue jobs by requester id, else login; chat turns by their key's owner; the operator's key; apps", async () => {
    const conversationOn = async (repositoryId: number | null, owner: [string, number | null]) => {
      const [login, id] = owner;
      const { rows } = await db.pool.query<{ id: string }>(
        `INSERT INTO conversations (kind, api_owner, api_owner_id, api_operator, repository_id)
         VALUES ('api', $1, $2, $3, $4) RETURNING id`,
        [login, id, id === null, repositoryId],
      );
      return Number(rows[0]?.id);
    };
    const spend = async (
      repositoryId: number | null,
      requester: string,
      costUsd: number,
      options: { requesterId?: number; conversationId?: number } = {},
    ) => {
      const { conversation } = await seedConversation(db, repositoryId ?? 20);
      const created = await insertJob(db.pool, {
        ...newJob(conversation),
        conversationId: options.conversationId ?? conversation.id,
        installationId: repositoryId === null ? null : 77,
        repositoryId,
        repo: repositoryId === null ? "scratch" : `acme/repo-${repositoryId}`,
        number: options.conversationId ? null : conversation.number,
        trigger: options.conversationId ? "chat" : "label",
        requester,
        context: options.requesterId ? { requesterId: options.requesterId } : {},
      });
      await updateJob(db.pool, created.id, { costUsd, usage: { inputTokens: 10 } });
    };
    await spend(11, "mona", 1, { requesterId: 55 });
    // Renamed since; the newest login is the one shown.
    await spend(12, "mona-renamed", 2, { requesterId: 55 });
    await spend(12, "mona-renamed", 0.5, {
      conversationId: await conversationOn(12, ["mona-renamed", 55]),
    });
    await spend(11, "operator", 0.75, {
      conversationId: await conversationOn(11, ["operator", null]),
    });
    // A job from before requester ids were recorded.
    await spend(11, "olduser", 0.25);
    await spend(null, "viewer", 0.1, {
      conversationId: await conversationOn(null, ["viewer", 77]),
    });
    await spend(12, "vmpilot-bot[bot]", 0.2);
    // Not counted: a repository the viewer cannot read, someone else's scratch conversation.
    await spend(13, "mona", 99, { requesterId: 55 });
    await spend(null, "other", 99, { conversationId: await conversationOn(null, ["other", 78]) });

    expect(await usageByPerson(db.pool, [11, 12], 30, 77)).toEqual([
      {
        spender: "55",
        login: "mona-renamed",
        jobs: 3,
        inputTokens: 30,
        outputTokens: 0,
        costUsd: 3.5,
      },
      {
        spender: "operator",
        login: null,
        jobs: 1,
        inputTokens: 10,
        outputTokens: 0,
        costUsd: 0.75,
      },
      {
        spender: "login:olduser",
        login: "olduser",
        jobs: 1,
        inputTokens: 10,
        outputTokens: 0,
        costUsd: 0.25,
      },
      {
        spender: "app:vmpilot-bot[bot]",
        login: "vmpilot-bot[bot]",
        jobs: 1,
        inputTokens: 10,
        outputTokens: 0,
        costUsd: 0.2,
      },
      { spender: "77", login: "viewer", jobs: 1, inputTokens: 10, outputTokens: 0, costUsd: 0.1 },
    ]);
  });

  it("counts an app's job on anyone's issue for the issue's author, shown by their login", async () => {
    const author = async (requester: string, context: Record<string, unknown>) => {
      const { conversation } = await seedConversation(db, 14);
      const created = await insertJob(db.pool, {
        ...newJob(conversation),
        repositoryId: 14,
        repo: "acme/repo-14",
        requester,
        context,
      });
      await updateJob(db.pool, created.id, { costUsd: 1, usage: { inputTokens: 10 } });
    };
    await author("pia", { requesterId: 56 });
    // An authors: any triage, the newest: the app requested it, pia spent it.
    await author("vmpilot-bot[bot]", {
      requesterId: 56,
      automation: { name: "triage", authors: "any", author: "pia" },
    });
    expect(await usageByPerson(db.pool, [14], 30)).toEqual([
      { spender: "56", login: "pia", jobs: 2, inputTokens: 20, outputTokens: 0, costUsd: 2 },
    ]);
  });
});
