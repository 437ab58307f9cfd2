// People are GitHub user ids, not logins (issue 26): a login can be anyone's ("operator", a name
// someone gave up). Rows stored when logins were the identity are carried over by the migration;
// then the pages show a chat-face job to the person whose id owns its conversation, and to nobody
// else.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Database } from "../../src/store/database.ts";
import { appendJobEvent, defineJobEvent } from "../../src/store/job-events.ts";
import { loadMigrations, migrate } from "../../src/store/migrate.ts";
import { databases, type TestDatabaseTarget } from "../helpers/db.ts";
import { Client, startWebHarness, type WebHarness } from "./helpers/harness.ts";

// PostgreSQL when TEST_DATABASE_URL is set: the migration runs where production's does.
const target = databases().at(-1) as TestDatabaseTarget;

let db: Database;
let h: WebHarness;
const OLD_ALICE = 501;
const jobs: Record<string, string> = {};

/** A chat-face conversation and a finished turn in it, as stored before owners were ids. */
async function oldConversation(owner: string, context: Record<string, unknown>, words: string) {
  const conversation = await db.pool.query<{ id: string }>(
    "INSERT INTO chats (kind, api_owner) VALUES ('api', $1) RETURNING id",
    [owner],
  );
  const conversationId = conversation.rows[0]?.id;
  const job = await db.pool.query<{ id: string }>(
    `INSERT INTO jobs (chat_id, repo, trigger, requester, instruction, status, context, cost_usd,
                       finished_at)
     VALUES ($1, 'scratch', 'chat', $2, $3, 'succeeded', $4, 2.5, now()) RETURNING id`,
    [conversationId, owner, words, JSON.stringify(context)],
  );
  const jobId = job.rows[0]?.id as string;
  await appendJobEvent(db.pool, Number(jobId), Tool, { output: `${words}: tool output` });
  return jobId;
}

// A type no version writes any more, shown by its name and fields.
const Tool = defineJobEvent("tool", z.object({ output: z.string() }));

beforeAll(async () => {
  db = await target.open({ migrate: false });
  const all = await loadMigrations();
  await migrate(db.pool, { migrations: all.filter((m) => m.version <= 16) });
  jobs.operator = await oldConversation("operator", { operator: true }, "the operator's plan");
  await db.pool.query(
    `INSERT INTO api_keys (name, owner_login, owner_id, hash, hint)
     VALUES ('laptop', 'alice', $1, 'old-alice-key-hash', 'abcd')`,
    [OLD_ALICE],
  );
  jobs.alice = await oldConversation("alice", {}, "alice's plan");
  // A person named "operator" had a key too: only what a turn recorded tells their conversations
  // apart.
  await db.pool.query(
    `INSERT INTO api_keys (name, owner_login, owner_id, hash, hint)
     VALUES ('ci', 'operator', 9003, 'operator-person-key-hash', 'wxyz')`,
  );
  jobs.operatorPerson = await oldConversation("operator", { operator: false }, "a person's plan");
  jobs.operatorUnknown = await oldConversation("operator", {}, "whose plan?");
  // Two people had keys under one login, one after the other.
  for (const [id, hash] of [
    [701, "bob-one"],
    [702, "bob-two"],
  ] as const) {
    await db.pool.query(
      `INSERT INTO api_keys (name, owner_login, owner_id, hash, hint)
       VALUES ('k', 'bob', $1, $2, 'bbbb')`,
      [id, hash],
    );
  }
  jobs.bob = await oldConversation("bob", {}, "bob's plan");
  await migrate(db.pool, { migrations: all });
  h = await startWebHarness({ db });
});

afterAll(async () => {
  await h?.close();
  await db?.close();
});

async function signedIn(login: string, id: number): Promise<Client> {
  const client = new Client(h.url);
  await client.signIn(h.github, login, "/", id);
  return client;
}

describe(`who sees a chat-face job (${target.name})`, () => {
  it("carries conversations over to the operator or a person's id, and leaves what it cannot tell to nobody", async () => {
    const owners = async (job: string | undefined) => {
      const { rows } = await db.pool.query(
        `SELECT c.api_operator, c.api_owner_id FROM conversations c JOIN jobs j ON j.conversation_id = c.id
          WHERE j.id = $1`,
        [job],
      );
      return rows[0];
    };
    expect(await owners(jobs.operator)).toEqual({ api_operator: true, api_owner_id: null });
    expect(await owners(jobs.alice)).toEqual({ api_operator: false, api_owner_id: "501" });
    expect(await owners(jobs.operatorPerson)).toEqual({
      api_operator: false,
      api_owner_id: "9003",
    });
    for (const job of [jobs.operatorUnknown, jobs.bob]) {
      expect(await owners(job)).toEqual({ api_operator: false, api_owner_id: null });
    }
  });

  it("nobody signed in as a login 'operator' or 'Operator' sees the operator's conversations, jobs or spending", async () => {
    for (const [login, id] of [
      ["operator", 9001],
      ["Operator", 9002],
    ] as const) {
      const client = await signedIn(login, id);
      const list = await (await client.get("/jobs")).text();
      expect(list).not.toContain(`href="/jobs/${jobs.operator}"`);
      expect(list).not.toContain("Your chat turns");
      expect((await client.get(`/jobs/${jobs.operator}`)).status).toBe(404);
      expect((await client.get(`/jobs/${jobs.operator}/events?after=0`)).status).toBe(404);
      expect(await (await client.get("/usage")).text()).not.toContain("$2.50");
    }
  });

  it("a login someone gave up does not bring its keys or jobs to whoever registers it next", async () => {
    const newAlice = await signedIn("alice", 777);
    const list = await (await newAlice.get("/jobs")).text();
    expect(list).not.toContain(`href="/jobs/${jobs.alice}"`);
    expect((await newAlice.get(`/jobs/${jobs.alice}`)).status).toBe(404);
    expect(await (await newAlice.get("/keys")).text()).not.toContain("…abcd");
    expect(await (await newAlice.get("/usage")).text()).not.toContain("$2.50");

    // The person who made them, under the login they have now, still has them.
    const renamed = await signedIn("alice-renamed", OLD_ALICE);
    expect(await (await renamed.get("/jobs")).text()).toContain(`href="/jobs/${jobs.alice}"`);
    const page = await (await renamed.get(`/jobs/${jobs.alice}`)).text();
    expect(page).toContain("alice&#39;s plan: tool output");
    expect(await (await renamed.get("/keys")).text()).toContain("…abcd");
  });
});
