// /v1/models with many repositories: GitHub is asked within each person's budget of calls per
// minute, answers are remembered per person, and the repositories a person's own token listed on
// the web come first; a model name the store lacks asks GitHub nothing. The real web role; GitHub
// behind nock, counting what it is asked.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import { createApiKey } from "../../src/store/api-keys.ts";
import type { Database } from "../../src/store/database.ts";
import { upsertInstallation } from "../../src/store/installations.ts";
import { rememberPushableRepositories } from "../../src/store/user-repositories.ts";
import { APP_SLUG, startTestServer, testConfig } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/db.ts";
import {
  expectGitHubDone,
  github,
  mockApp,
  mockInstallationToken,
  useGitHubMock,
} from "../helpers/github-mock.ts";

useGitHubMock();

const BUDGET = 50;
const REPOSITORIES = 300;
const INSTALLATION = 71;
const repoName = (i: number) => `acme/r${String(i).padStart(3, "0")}`;

let db: Database;
let server: RunningServer;
let tokenMocked = false;

beforeAll(async () => {
  db = await openTestDatabase();
  await upsertInstallation(db.pool, { id: INSTALLATION, accountLogin: "acme" });
  // Each repository's file is known: only permissions are asked.
  await db.pool.query(
    `INSERT INTO repositories (id, installation_id, full_name, file_settings)
     SELECT 1000 + i, $1, 'acme/r' || lpad(i::text, 3, '0'), '{}' FROM generate_series(1, $2) i`,
    [INSTALLATION, REPOSITORIES],
  );
  mockApp(APP_SLUG);
  server = await startTestServer(db, {
    // Requests per key are not what these tests are about.
    config: testConfig({ chatRatePerMinute: 1000 }),
    role: "web",
    chat: { githubCallsPerMinute: BUDGET },
  });
  expectGitHubDone();
});

afterAll(async () => {
  await server?.close();
  await db?.close();
});

/** A key of a person GitHub knows by this id and login, who may push everywhere. */
async function person(id: number, login: string) {
  const { secret } = await createApiKey(db.pool, {
    name: "laptop",
    ownerLogin: login,
    ownerId: id,
  });
  if (!tokenMocked) mockInstallationToken(INSTALLATION);
  tokenMocked = true;
  const asked: string[] = [];
  github()
    .persist()
    .get(`/user/${id}`)
    .reply(() => {
      asked.push("user");
      return [200, { login, id }];
    })
    .get(new RegExp(`^/repos/acme/r\\d{3}/collaborators/${login}/permission$`))
    .reply((request: Request) => {
      asked.push(new URL(request.url).pathname);
      return [200, { permission: "write", role_name: "write", user: { login } }];
    });
  const client = new OpenAI({ apiKey: secret, baseURL: `${server.url}/v1`, maxRetries: 0 });
  return { client, asked };
}

const models = async (client: OpenAI) => (await client.models.list()).data.map((m) => m.id);

describe("/v1/models with 300 repositories", () => {
  it("asks about the repositories a person's own token listed on the web, not about every one", async () => {
    await rememberPushableRepositories(db.pool, 6, [1007, 1100, 1250]);
    const { client, asked } = await person(6, "lisa");
    expect(await models(client)).toEqual([
      "vmpilot",
      "vmpilot/acme/r007",
      "vmpilot/acme/r100",
      "vmpilot/acme/r250",
    ]);
    expect(asked.filter((call) => call.endsWith("/permission"))).toHaveLength(3);
  });

  it("asks GitHub at most the budget's calls a minute, and nothing again while it remembers", async () => {
    const { client, asked } = await person(5, "mona");
    const first = await models(client);
    // The first test spent a little of this minute's budget.
    expect(asked.length).toBeLessThanOrEqual(BUDGET);
    const permissions = asked.filter((call) => call.endsWith("/permission"));
    expect(permissions.length).toBeGreaterThan(BUDGET / 2);
    // Every repository GitHub was asked about is listed (mona may push to all), and scratch.
    expect(first).toHaveLength(permissions.length + 1);
    expect(first[0]).toBe("vmpilot");

    const calls = asked.length;
    expect(await models(client)).toEqual(first);
    expect(asked).toHaveLength(calls);

    // The budget is spent: a repository not asked about yet waits for the next minute.
    const unasked = Array.from({ length: REPOSITORIES }, (_, i) => repoName(i + 1)).find(
      (name) => !first.includes(`vmpilot/${name}`),
    );
    const refused = await client.chat.completions
      .create({ model: `vmpilot/${unasked}`, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ status: 429, code: "rate_limit_exceeded" });
    const retryAfter = Number(
      (refused as InstanceType<typeof OpenAI.RateLimitError>).headers?.get("retry-after"),
    );
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(asked).toHaveLength(calls);
  });

  it("gives each person a budget of their own: one person's spent minute leaves another's answers", async () => {
    // mona spent hers in the test before.
    const { client, asked } = await person(7, "hubot");
    const listed = await models(client);
    expect(listed[0]).toBe("vmpilot");
    expect(listed.length).toBeGreaterThan(BUDGET / 2);
    expect(asked.length).toBeLessThanOrEqual(BUDGET);
  });

  it("answers 110 model names the store lacks from the store, asking GitHub nothing, and another writer is still answered", async () => {
    const { secret } = await createApiKey(db.pool, { name: "k", ownerLogin: "eve", ownerId: 8 });
    const eve = new OpenAI({ apiKey: secret, baseURL: `${server.url}/v1`, maxRetries: 0 });
    const hi = [{ role: "user" as const, content: "hi" }];
    for (let i = 0; i < 110; i++) {
      const refused = await eve.chat.completions
        .create({ model: `vmpilot/acme/nope${i}`, messages: hi })
        .catch((e: unknown) => e);
      expect(refused).toMatchObject({ status: 404, code: "model_not_found" });
    }
    // Open WebUI's title chore, answered at once once the model is decided.
    const { client, asked } = await person(9, "lisa9");
    const title = await client.chat.completions.create({
      model: "vmpilot/acme/r001",
      messages: [
        {
          role: "user",
          content:
            '### Task:\nA title.\n### Output:\n{ "title": "..." }\n<chat_history>\nUSER: hi\n</chat_history>',
        },
      ],
    });
    expect(JSON.parse(title.choices[0]?.message.content ?? "")).toEqual({ title: "hi" });
    expect(asked).toEqual(["user", "/repos/acme/r001/collaborators/lisa9/permission"]);
  });
});
