/**
 * The chat face with the `openai` client: time to first chunk (request sent → the first streamed
 * chunk), and streaming overhead per agent event (the worker storing an event → the client
 * receiving its chunk), with the real server (role all: web and worker), store, queue and
 * sandbox, the model behind the loopback Anthropic fake. On PGlite, and on PostgreSQL when
 * TEST_DATABASE_URL is set. Goals: first chunk p50 <= 100 ms; overhead per event p99 <= 50 ms.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { replyPiece } from "../src/jobs/chat-reply/reply.ts";
import { createLogger } from "../src/log/logger.ts";
import { startServer } from "../src/main.ts";
import { listJobEvents } from "../src/store/job-events.ts";
import { startGitHubFake } from "../test/e2e/github-fake.ts";
import { startAnthropicFake, text, toolUse } from "../test/helpers/anthropic-fake.ts";
import { APP_SLUG, testConfig } from "../test/helpers/app.ts";
import { databases } from "../test/helpers/db.ts";

const TURNS = 30;
const COMMANDS = 4;
const KEY = `bench-${"k".repeat(40)}`;
const FIRST_CHUNK_GOAL = 100;
const OVERHEAD_GOAL = 50;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return (
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
  );
}

const gh = await startGitHubFake({ slug: APP_SLUG, token: `ghs_${"b".repeat(36)}` });
let failed = false;
for (const target of databases()) {
  const db = await target.open();
  const fake = await startAnthropicFake();
  const data = await mkdtemp(join(tmpdir(), "vmpilot-bench-chat-"));
  const server = await startServer({
    config: testConfig({ baseUrl: gh.url, apiKey: KEY, dataDir: join(data, "home") }),
    role: "all",
    db,
    logger: createLogger({ level: "silent", format: "json" }),
    queue: { pollingIntervalSeconds: 0.5 },
    work: {
      anthropic: { apiKey: `sk-ant-api03-${"b".repeat(40)}`, baseURL: fake.url, maxRetries: 0 },
      dataDir: join(data, "work"),
    },
  });
  const client = new OpenAI({ apiKey: KEY, baseURL: `${server.url}/v1`, maxRetries: 0 });
  const firstChunk: number[] = [];
  const overhead: number[] = [];
  for (let turn = 0; turn < TURNS; turn++) {
    for (let i = 0; i < COMMANDS; i++) {
      fake.push({ content: [toolUse("bash", { command: `echo step ${i}` })] });
    }
    fake.push({ content: [text("Done.")] });
    const received: number[] = [];
    const started = Date.now();
    const stream = await client.chat.completions.create({
      model: "vmpilot",
      messages: [{ role: "user", content: `turn ${turn}` }],
      stream: true,
    });
    for await (const chunk of stream) {
      if (received.length === 0) firstChunk.push(Date.now() - started);
      if (chunk.choices[0]?.delta.content) received.push(Date.now());
    }
    // The chunks after the "working…" line are the events' pieces, in order.
    const { rows } = await db.pool.query<{ id: string }>(
      "SELECT id FROM jobs WHERE trigger = 'chat' ORDER BY id DESC LIMIT 1",
    );
    const events = (await listJobEvents(db.pool, Number(rows[0]?.id))).filter(
      (event) => replyPiece(event) !== "",
    );
    const pieces = received.slice(1);
    if (pieces.length !== events.length)
      throw new Error(`${pieces.length} chunks for ${events.length} events`);
    for (const [i, event] of events.entries()) {
      overhead.push((pieces[i] as number) - event.at.getTime());
    }
  }
  const p50 = percentile(firstChunk, 50);
  const p99 = percentile(overhead, 99);
  console.log(
    `${target.name}: first chunk p50 ${p50} ms, p99 ${percentile(firstChunk, 99)} ms (goal p50 <= ${FIRST_CHUNK_GOAL}); ` +
      `overhead per event p50 ${percentile(overhead, 50)} ms, p99 ${p99} ms over ${overhead.length} events (goal p99 <= ${OVERHEAD_GOAL})`,
  );
  if (p50 > FIRST_CHUNK_GOAL || p99 > OVERHEAD_GOAL) failed = true;
  await server.close();
  await db.close();
  await fake.close();
  await rm(data, { recursive: true, force: true });
}
await gh.close();
if (failed) console.log("a goal was missed");
