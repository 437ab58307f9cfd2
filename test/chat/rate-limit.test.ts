// The chat face's requests per key per minute are counted in the store, so two web processes on one
// database allow the limit between them, not each. Two web servers in-process stand for them
// (PostgreSQL when TEST_DATABASE_URL is set).
import { request } from "node:http";
import OpenAI from "openai";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import { createApiKey, revokeApiKey } from "../../src/store/api-keys.ts";
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

it(`counts a person's keys together: a new key does not start a new minute (${target.name})`, async () => {
  const [one, two] = servers;
  const person = { name: "k", ownerLogin: "nils", ownerId: 7 };
  const first = await createApiKey(db.pool, person);
  await client(one, first.secret).models.list();
  await client(two, first.secret).models.list();
  await expect(client(one, first.secret).models.list()).rejects.toMatchObject({ status: 429 });
  expect(await revokeApiKey(db.pool, first.key.id, person.ownerId)).toBe(true);
  const second = await createApiKey(db.pool, person);
  const refused = await client(two, second.secret)
    .models.list()
    .catch((e: unknown) => e);
  expect(refused).toMatchObject({ status: 429, code: "rate_limit_exceeded" });
  expect(String((refused as Error).message)).toContain(
    "2 requests per minute for your keys together",
  );
  // Someone else's key counts apart.
  const other = await createApiKey(db.pool, { ...person, ownerLogin: "lars", ownerId: 8 });
  expect((await client(one, other.secret).models.list()).data).toEqual([]);
});

/** GET /v1/models with a key from a loopback address of the caller's choosing. */
function modelsFrom(
  server: RunningServer | undefined,
  localAddress: string,
  apiKey: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; retryAfter: number }> {
  const { port } = new URL(server?.url ?? "");
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: "/v1/models",
        localAddress,
        headers: { authorization: `Bearer ${apiKey}`, ...headers },
      },
      (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, retryAfter: Number(res.headers["retry-after"]) });
      },
    );
    req.on("error", reject).end();
  });
}

it(`holds back an address that tried 10 wrong keys, but for keys right before, until its 10 minutes are over (${target.name})`, async () => {
  const [one, two] = servers;
  // Each a person of their own: requests count per person, two a minute here.
  let person = 600;
  const goodKey = async () => {
    const ownerId = person++;
    return (await createApiKey(db.pool, { name: "k", ownerLogin: `p${ownerId}`, ownerId })).secret;
  };
  const attacker = "127.0.0.3";
  const used = await goodKey();
  expect(await modelsFrom(one, "127.0.0.4", used)).toMatchObject({ status: 200 });
  // Two web processes share the count.
  for (let i = 0; i < 10; i++) {
    const server = i % 2 ? one : two;
    expect(await modelsFrom(server, attacker, `vmp_wrong${i}`)).toMatchObject({ status: 401 });
  }
  const refused = await modelsFrom(one, attacker, "vmp_wrong10");
  expect(refused.status).toBe(429);
  expect(refused.retryAfter).toBeGreaterThan(60);
  expect(refused.retryAfter).toBeLessThanOrEqual(600);
  // A right key never used before could be a guess; a key right before is not held back, whoever
  // shares the address (the operator's: the next test).
  expect(await modelsFrom(two, attacker, await goodKey())).toMatchObject({ status: 429 });
  expect(await modelsFrom(two, attacker, used)).toMatchObject({ status: 200 });
  expect(await modelsFrom(one, attacker, "vmp_wrong11")).toMatchObject({ status: 429 });
  // Another address is not held back.
  expect(await modelsFrom(one, "127.0.0.4", await goodKey())).toMatchObject({ status: 200 });

  await db.pool.query(
    "UPDATE api_key_failures SET window_start = window_start - interval '10 minutes'",
  );
  expect(await modelsFrom(one, attacker, await goodKey())).toMatchObject({ status: 200 });
  expect(await modelsFrom(one, attacker, "vmp_wrong11")).toMatchObject({ status: 401 });
});

it(`counts wrong keys by the address a trusted proxy names, and only when told to (${target.name})`, async () => {
  // An operator key this database has not seen right yet.
  const newOperatorKey = `op-${"n".repeat(40)}`;
  mockApp(APP_SLUG);
  const behindProxy = await startTestServer(db, {
    config: testConfig({ apiKey: newOperatorKey, clientAddressHeader: "fly-client-ip" }),
    role: "web",
  });
  servers.push(behindProxy);
  const proxy = "127.0.0.5";
  const from = (client: string) => ({ "fly-client-ip": client });
  for (let i = 0; i < 10; i++) {
    const wrong = await modelsFrom(behindProxy, proxy, `vmp_bad${i}`, from("198.51.100.1"));
    expect(wrong.status).toBe(401);
  }
  expect(await modelsFrom(behindProxy, proxy, newOperatorKey, from("198.51.100.1"))).toMatchObject({
    status: 429,
  });
  // Another client behind the same proxy is not held back; once the key was right there, it is
  // right from the held client too.
  expect(await modelsFrom(behindProxy, proxy, newOperatorKey, from("198.51.100.2"))).toMatchObject({
    status: 200,
  });
  expect(await modelsFrom(behindProxy, proxy, newOperatorKey, from("198.51.100.1"))).toMatchObject({
    status: 200,
  });
  // Without the setting the header is the client's to choose, so it is not read.
  const [plain] = servers;
  const spoofer = "127.0.0.6";
  for (let i = 0; i < 10; i++) {
    await modelsFrom(plain, spoofer, `vmp_bad${i}`, from(`203.0.113.${i}`));
  }
  expect(await modelsFrom(plain, spoofer, "vmp_bad10", from("203.0.113.99"))).toMatchObject({
    status: 429,
  });
});
