// The chat face with the web role and a worker role in separate processes, on one database
// (PostgreSQL when TEST_DATABASE_URL is set): the web process queues the turn and relays the
// job log the worker process writes.
import type { ChildProcess } from "node:child_process";
import { mkdtemp, realpath } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, expect, it } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { getJob } from "../../src/store/jobs.ts";
import { type GitHubFake, startGitHubFake } from "../e2e/github-fake.ts";
import {
  type AnthropicFake,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import { APP_SLUG, startTestServer, testConfig } from "../helpers/app.ts";
import { databases, type TestDatabaseTarget } from "../helpers/db.ts";
import { removeTree } from "../helpers/remove-tree.ts";
import { spawnServerProcess } from "../helpers/spawn-server.ts";
import { waitUntil } from "../workspace/helpers.ts";

const OPERATOR_KEY = `op-${"p".repeat(40)}`;
const QUEUE = { pollingIntervalSeconds: 0.5, concurrency: 1 };
const target = databases().at(-1) as TestDatabaseTarget;

let base: string;
let gh: GitHubFake;
let fake: AnthropicFake;
let db: Database;
let web: RunningServer | undefined;
let worker: ChildProcess | undefined;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-chat-procs-")));
  gh = await startGitHubFake({ slug: APP_SLUG, token: `ghs_${"t".repeat(36)}`, issues: {} });
  fake = await startAnthropicFake();
  db = await target.open();
});

afterAll(async () => {
  worker?.kill("SIGKILL");
  await web?.close();
  await db?.close();
  await fake?.close();
  await gh?.close();
  if (base) await removeTree(base);
});

async function spawnWorker(): Promise<ChildProcess> {
  const started = await spawnServerProcess({
    config: { baseUrl: gh.url, databaseUrl: db.url, dataDir: join(base, "worker-home") },
    queue: QUEUE,
    work: {
      anthropic: { apiKey: `sk-ant-api03-${"w".repeat(40)}`, baseURL: fake.url, maxRetries: 0 },
      dataDir: join(base, "worker-data"),
      streamRetryDelayMs: 1,
    },
  });
  return started.process;
}

it(`a turn asked of the web process runs in the worker process and streams back (${target.name})`, {
  timeout: 60_000,
}, async () => {
  web = await startTestServer(db, {
    config: testConfig({ baseUrl: gh.url, apiKey: OPERATOR_KEY }),
    role: "web",
    queue: QUEUE,
    chat: { pollIntervalMs: 20 },
  });
  worker = await spawnWorker();
  fake.push(
    { content: [toolUse("bash", { command: "echo from-the-worker" })] },
    { content: [text("Done.")] },
  );
  const client = new OpenAI({ apiKey: OPERATOR_KEY, baseURL: `${web.url}/v1`, maxRetries: 0 });
  const stream = await client.chat.completions.create({
    model: "vmpilot",
    messages: [{ role: "user", content: "say where you run" }],
    stream: true,
  });
  let content = "";
  for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? "";
  expect(content).toMatch(/```text\nfrom-the-worker\n```/);
  expect(content).toContain("Done.");
  const { rows } = await db.pool.query<{ id: string; worker_id: string | null }>(
    "SELECT id, worker_id FROM jobs WHERE trigger = 'chat' ORDER BY id DESC LIMIT 1",
  );
  // The reply's last event is written before the queue marks the job done.
  const done = async () => (await getJob(db.pool, Number(rows[0]?.id)))?.status === "succeeded";
  expect(await waitUntil(done, 10_000)).toBe(true);
  // The web role claims no worker identity: the worker process ran it.
  expect(rows[0]?.worker_id).toBeTruthy();
  expect(fake.problems).toEqual([]);
});
