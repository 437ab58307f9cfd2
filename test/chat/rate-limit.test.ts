// The chat face's requests per key per minute are counted in the store, so two web processes on one
// database allow the limit between them, not each. Two web servers in-process stand for them
// (PostgreSQL when TEST_DATABASE_URL is set).
import OpenAI from "openai";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import { createApiKey } from "../../src/store/api-keys.ts";
import type { Database } from "../../src/store/database.ts";
import { APP_SLUG, startTestServer, testConfig } from "../helpers/app.ts";
import { databases, type TestDatabaseTarget } from "../helpers/db.ts";
import { mockApp, useGitHubMock } from "../helpers/github-mock.ts";

useGitHubMock();

const OPERATOR_KEY = `op-${"r".repeat(40)}`;
const target = databases().at(-1) as TestDatabaseTarget;

let db: Database;
const servers: RunningServer[] = [];

beforeAll(async () => {
  db = await target.open();
  for (let i = 0; i < 2; i++) {
    mockApp(APP_SLUG);
    servers.push(
      await startTestServer(db, {
        config: testConfig({ apiKey: OPERATOR_KEY, chatRatePerMinute: 2 }),
        role: "web",
      }),
    );
  }
});

afterAll(async () => {
  for (const server of servers) await server.close();
  await db?.close();
});

const client = (server: RunningServer | undefined, apiKey = OPERATOR_KEY) =>
  new OpenAI({ apiKey, baseURL: `${server?.url}/v1`, maxRetries: 0 });

it(`two web processes share one limit per key, until the minute is over (${target.name})`, async () => {
  const [one, two] = servers;
  await client(one).models.list();
  await client(two).models.list();
  const refused = await client(one)
    .models.list()
    .catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
  expect(refused).toMatchObject({ status: 429, code: "rate_limit_exceeded" });
  const retryAfter = Number(
    (refused as InstanceType<typeof OpenAI.RateLimitError>).headers?.get("retry-after"),
  );
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  await expect(client(two).models.list()).rejects.toMatchObject({ status: 429 });

  // Another key counts apart.
  const { secret } = await createApiKey(db.pool, { name: "k", ownerLogin: "mona", ownerId: 5 });
  expect((await client(two, secret).models.list()).data).toEqual([]);

  // The operator's minute is over.
  await db.pool.query(
    "UPDATE chat_rate_limits SET window_start = window_start - interval '1 minute'",
  );
  await client(two).models.list();
  await client(one).models.list();
  await expect(client(one).models.list()).rejects.toMatchObject({ status: 429 });
});
