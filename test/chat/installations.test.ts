// The operator's story: vmpilot starts on an empty database (a move to PostgreSQL, a restore) while
// GitHub already has the app installed. No webhook comes; the chat face offers the repository all
// the same, and a turn on it runs. The real server, store, queue, worker and sandbox in-process;
// GitHub, the model and the git remote are loopback fakes.
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { type GitHubFake, startGitHubFake } from "../e2e/github-fake.ts";
import { seedServedRepo } from "../e2e/remote.ts";
import {
  type AnthropicFake,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import { APP_SLUG, startTestServer, testConfig } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/db.ts";
import { type GitHttpServer, startGitHttpServer } from "../helpers/git-http-server.ts";

const OPERATOR_KEY = `op-${"i".repeat(40)}`;
const TOKEN = `ghs_${"installedRepoTok".repeat(2)}`;
const REPO = "acme/widgets";

let base: string;
let gh: GitHubFake;
let fake: AnthropicFake;
let git: GitHttpServer;
let db: Database;
let server: RunningServer;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-installed-")));
  seedServedRepo(base, REPO);
  git = await startGitHttpServer({ projectRoot: join(base, "served"), token: TOKEN });
  gh = await startGitHubFake({
    slug: APP_SLUG,
    token: TOKEN,
    installations: [{ id: 55, account: "acme", repositories: [{ id: 701, fullName: REPO }] }],
  });
  fake = await startAnthropicFake();
  db = await openTestDatabase();
  server = await startTestServer(db, {
    config: testConfig({
      baseUrl: gh.url,
      apiKey: OPERATOR_KEY,
      installationSyncMinutes: 15,
    }),
    chat: { pollIntervalMs: 20, cloneUrl: (fullName) => git.url(`${fullName}.git`) },
    work: {
      anthropic: { apiKey: `sk-ant-api03-${"i".repeat(40)}`, baseURL: fake.url, maxRetries: 0 },
      dataDir: join(base, "data"),
      streamRetryDelayMs: 1,
    },
  });
});

afterAll(async () => {
  await server?.close();
  await db?.close();
  await fake?.close();
  await gh?.close();
  await git?.close();
  if (base) await rm(base, { recursive: true, force: true });
});

it("lists an installed repository and runs a turn on it though no webhook came", {
  timeout: 60_000,
}, async () => {
  const client = new OpenAI({ apiKey: OPERATOR_KEY, baseURL: `${server.url}/v1`, maxRetries: 0 });
  // The worker reconciles with GitHub at start.
  await vi.waitFor(
    async () => {
      const models = await client.models.list();
      expect(models.data.map((m) => m.id)).toEqual(["vmpilot", `vmpilot/${REPO}`]);
    },
    { timeout: 20_000, interval: 100 },
  );
  fake.push(
    { content: [toolUse("bash", { command: "cat README.md" })] },
    { content: [text("It greets the world.")] },
  );
  const reply = await client.chat.completions.create({
    model: `vmpilot/${REPO}`,
    messages: [{ role: "user", content: "what does the README say?" }],
  });
  const content = reply.choices[0]?.message.content ?? "";
  expect(content).toMatch(/```text\nHelo World\n```/);
  expect(content).toContain("It greets the world.");
  expect(gh.problems).toEqual([]);
  expect(fake.problems).toEqual([]);
});
