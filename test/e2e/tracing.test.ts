// One job's trace over OTLP: a web process receives the webhook, a worker process runs the job,
// both export to a loopback collector (test/helpers/otlp-receiver.ts) in OTLP/HTTP's JSON
// encoding, and the spans form one tree from the delivery to the pull request. GitHub is a
// loopback fake both processes reach, the model the Anthropic fake. And with no endpoint set, no
// SDK starts at all.
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, realpath } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { trace } from "@opentelemetry/api";
import { afterAll, beforeAll, expect, it } from "vitest";
import { loadConfig } from "../../src/config/env.ts";
import { DEFAULT_MODEL, resolveModel } from "../../src/config/models.ts";
import type { TracingConfig } from "../../src/config/tracing.ts";
import type { Database } from "../../src/store/database.ts";
import {
  type AnthropicFake,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import { APP_SLUG, appPrivateKey, startTestServer, WEBHOOK_SECRET } from "../helpers/app.ts";
import { databases, jobFinished, type TestDatabaseTarget } from "../helpers/db.ts";
import { type GitHttpServer, startGitHttpServer } from "../helpers/git-http-server.ts";
import {
  type OtlpReceiver,
  type ReceivedSpan,
  startOtlpReceiver,
} from "../helpers/otlp-receiver.ts";
import { removeTree } from "../helpers/remove-tree.ts";
import { spawnServerProcess } from "../helpers/spawn-server.ts";
import { deliver, examplePayload } from "../helpers/webhooks.ts";
import { type GitHubFake, startGitHubFake } from "./github-fake.ts";
import { seedServedRepo, TYPO_ISSUE } from "./remote.ts";

const REPO = "Codertocat/Hello-World";
const TOKEN = `ghs_${"traceTestInstallTok".repeat(2)}`;
const API_KEY = `sk-ant-api03-${"t".repeat(40)}`;
/** What the collector wants to be sent (OTEL_EXPORTER_OTLP_HEADERS): a secret too. */
const COLLECTOR_KEY = `collector-key-${"c".repeat(24)}`;
const COMMAND = "sed -i 's/Helo/Hello/' README.md";
const TESTS = "sh test.sh";
const QUEUE = { pollingIntervalSeconds: 0.5, concurrency: 1 };
// OTLP's span kinds: the API's, plus one.
const SERVER = 2;
const CLIENT = 3;
const CONSUMER = 5;
const target = databases().at(-1) as TestDatabaseTarget;

let base: string;
let git: GitHttpServer;
let gh: GitHubFake;
let fake: AnthropicFake;
let receiver: OtlpReceiver;
let db: Database;
const children: ChildProcess[] = [];

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-tracing-")));
  seedServedRepo(base, REPO);
  git = await startGitHttpServer({ projectRoot: join(base, "served"), token: TOKEN });
  gh = await startGitHubFake({
    slug: APP_SLUG,
    token: TOKEN,
    issues: { [`${REPO}#1`]: TYPO_ISSUE },
  });
  fake = await startAnthropicFake();
  receiver = await startOtlpReceiver();
  db = await target.open();
});

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await db?.close();
  await receiver?.close();
  await fake?.close();
  await gh?.close();
  await git?.close();
  if (base) await removeTree(base);
});

/** Stops a server process as `npm start` is stopped; it sends the spans it still holds first. */
async function stop(child: ChildProcess): Promise<void> {
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const [code] = await exited;
  expect(code).toBe(0);
}

/** The span's chain of parents up to the root, nearest first. */
function ancestors(span: ReceivedSpan, spans: ReceivedSpan[]): ReceivedSpan[] {
  const chain: ReceivedSpan[] = [];
  for (let at = span; at.parentSpanId; ) {
    const parent = spans.find((s) => s.spanId === at.parentSpanId);
    if (!parent) break;
    chain.push(parent);
    at = parent;
  }
  return chain;
}

function only(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const found = spans.filter((span) => span.name === name);
  expect(found.map((span) => span.name)).toEqual([name]);
  return found[0] as ReceivedSpan;
}

it(`one job is one trace from the delivery in the web process, through the queue, to the pull request in the worker process (${target.name})`, {
  timeout: 90_000,
}, async () => {
  const tracing: TracingConfig = {
    url: `${receiver.url}/v1/traces`,
    headers: { "x-collector-key": COLLECTOR_KEY },
    serviceName: "vmpilot",
    toolContent: false,
  };
  const config = { baseUrl: gh.url, databaseUrl: db.url, tracing };
  const web = await spawnServerProcess({ role: "web", config, queue: QUEUE });
  children.push(web.process);
  const worker = await spawnServerProcess({
    role: "worker",
    config: { ...config, dataDir: join(base, "worker-home") },
    queue: QUEUE,
    paced: false,
    work: {
      anthropic: { apiKey: API_KEY, baseURL: fake.url, maxRetries: 0 },
      dataDir: join(base, "worker-data"),
      workspace: { isolation: "none", engine: "local" },
      progressIntervalMs: 60_000,
      streamRetryDelayMs: 1,
    },
  });
  children.push(worker.process);
  fake.push(
    { content: [text("Fixing the typo."), toolUse("bash", { command: COMMAND })] },
    { content: [toolUse("report_tests", { outcome: "passed", command: TESTS })] },
    { content: [text("Fixed it.\n\nSummary: Fix Helo typo")] },
    // The second look at the diff before the pull request.
    { content: [text("Nothing found.")] },
  );

  const payload = examplePayload("issues", "labeled");
  payload.installation = { id: 31 };
  payload.label.name = "vmpilot";
  payload.repository.clone_url = git.url(`${REPO}.git`);
  const response = await deliver(web.url, { event: "issues", payload, secret: WEBHOOK_SECRET });
  expect(response.status).toBe(200);
  const { rows } = await db.pool.query<{ id: string }>(
    "SELECT id FROM jobs WHERE delivery_id = $1",
    [response.id],
  );
  const jobId = Number(rows[0]?.id);
  expect(await jobFinished(db, jobId)).toMatchObject({ status: "succeeded", prNumber: 100 });
  await stop(worker.process);
  await stop(web.process);
  expect(receiver.problems).toEqual([]);
  expect(fake.problems).toEqual([]);
  expect(gh.problems).toEqual([]);

  // The delivery's span is the root, in the web process; everything of the job is in its trace.
  const delivery = receiver.spans.find(
    (span) => span.attributes["github.delivery"] === response.id,
  );
  expect(delivery).toMatchObject({
    name: "POST /api/github/webhooks",
    kind: SERVER,
    resource: { "service.name": "vmpilot", "vmpilot.role": "web" },
    attributes: {
      "http.response.status_code": 200,
      "github.event": "issues",
      "vmpilot.delivery.outcome": "job",
      "vmpilot.job.id": jobId,
    },
  });
  const root = delivery as ReceivedSpan;
  expect(root.parentSpanId).toBeUndefined();
  const trace = receiver.spans.filter((span) => span.traceId === root.traceId);
  for (const span of trace) {
    if (span !== root) expect(ancestors(span, trace).at(-1)).toBe(root);
  }

  // Through the queue to the worker process: its wait, then the attempt, both under the delivery.
  const wait = only(trace, "queue wait");
  const job = only(trace, "job");
  expect(wait).toMatchObject({ parentSpanId: root.spanId, resource: { "vmpilot.role": "worker" } });
  expect(job).toMatchObject({
    parentSpanId: root.spanId,
    kind: CONSUMER,
    resource: { "vmpilot.role": "worker" },
    attributes: {
      "vmpilot.job.id": jobId,
      "vmpilot.job.attempt": 1,
      "vmpilot.job.kind": "issue job",
      "vmpilot.job.outcome": "succeeded",
    },
  });
  expect(wait.endMs).toBeLessThanOrEqual(job.startMs);
  const underJob = (span: ReceivedSpan) => expect(ancestors(span, trace)).toContain(job);
  for (const name of ["workspace open", "invoke_agent vmpilot", "git push", "pull request"]) {
    underJob(only(trace, name));
  }
  expect(ancestors(only(trace, "git checkout"), trace)[0]).toBe(only(trace, "workspace open"));
  expect(only(trace, "pull request").attributes).toMatchObject({
    "vmpilot.pull_request.number": 100,
    "vmpilot.pull_request.created": true,
  });

  // Each model request, as the GenAI conventions say, with what the model server reported.
  const agent = only(trace, "invoke_agent vmpilot");
  const model = resolveModel(DEFAULT_MODEL).id;
  const requests = trace.filter((span) => span.name === `chat ${model}`);
  // The run's three, and the second look's one.
  expect(requests).toHaveLength(4);
  for (const [n, span] of requests.entries()) {
    const usage = fake.usages[n];
    expect(span.parentSpanId).toBe(agent.spanId);
    expect(span).toMatchObject({
      kind: CLIENT,
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.system": "anthropic",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens":
          (usage?.input_tokens ?? 0) +
          (usage?.cache_read_input_tokens ?? 0) +
          (usage?.cache_creation_input_tokens ?? 0),
        "gen_ai.usage.output_tokens": usage?.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage?.cache_read_input_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage?.cache_creation_input_tokens,
        "gen_ai.response.finish_reasons": [n < 2 ? "tool_use" : "end_turn"],
      },
    });
    expect(span.attributes["vmpilot.cost_usd"]).toBeGreaterThan(0);
  }

  // Each tool call: what it ran, by length, and how that exited; not the command itself.
  const bash = only(trace, "execute_tool bash");
  const tests = only(trace, "execute_tool report_tests");
  expect(bash.attributes).toMatchObject({
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "bash",
    "vmpilot.tool.command.length": COMMAND.length,
    "process.exit.code": 0,
  });
  expect(tests.attributes).toMatchObject({
    "vmpilot.tool.command.length": TESTS.length,
    "process.exit.code": 0,
  });
  for (const span of [bash, tests]) {
    expect(span.parentSpanId).toBe(agent.spanId);
    expect(span.attributes["gen_ai.tool.call.arguments"]).toBeUndefined();
    expect(span.attributes["gen_ai.tool.call.result"]).toBeUndefined();
  }

  // The pull request and the progress comment, written to GitHub within the job.
  const writes = trace.filter((span) => span.kind === CLIENT && /^(POST|PATCH) /.test(span.name));
  expect(writes.map((span) => span.name)).toEqual(
    expect.arrayContaining([
      "POST /repos/{owner}/{repo}/pulls",
      "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
      "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}",
    ]),
  );
  for (const span of writes) underJob(span);

  // Sent with the collector's key, and no secret, command or issue text in any export.
  expect(receiver.headers.every((h) => h["x-collector-key"] === COLLECTOR_KEY)).toBe(true);
  const exported = receiver.bodies.join("\n");
  const keyLine = appPrivateKey().split("\n")[1] as string;
  for (const secret of [TOKEN, API_KEY, WEBHOOK_SECRET, COLLECTOR_KEY, keyLine]) {
    expect(exported).not.toContain(secret);
  }
  expect(exported).not.toContain("Helo/Hello");
  expect(exported).not.toContain("Helo?");
});

it(`with no OTLP endpoint set, no SDK starts: spans stay the API's no-ops and a queued job carries no trace (${target.name})`, async () => {
  const env = { APP_ID: "12345", PRIVATE_KEY: appPrivateKey(), WEBHOOK_SECRET };
  const loaded = loadConfig(env, base);
  if ("problems" in loaded) throw new Error(loaded.problems.join("\n"));
  expect(loaded.config.tracing).toBeUndefined();
  const config = { ...loaded.config, host: "127.0.0.1", port: 0, baseUrl: gh.url };
  const web = await startTestServer(db, { config: { ...config, logLevel: "silent" }, role: "web" });
  try {
    const payload = examplePayload("issues", "labeled");
    payload.installation = { id: 31 };
    payload.label.name = "vmpilot";
    Object.assign(payload.issue, { id: 2_000_002, number: 2 });
    const response = await deliver(web.url, { event: "issues", payload, secret: WEBHOOK_SECRET });
    expect(response.status).toBe(200);
    const { rows } = await db.pool.query<{ data: unknown }>(
      "SELECT q.data FROM pgboss.job q JOIN jobs ON jobs.id = (q.data->>'jobId')::bigint WHERE q.name = 'vmpilot-jobs' AND jobs.delivery_id = $1",
      [response.id],
    );
    expect(rows.map((row) => row.data)).toEqual([
      { jobId: expect.any(Number), conversationKey: expect.any(String) },
    ]);
    expect(trace.getTracer("probe").startSpan("probe").isRecording()).toBe(false);
  } finally {
    await web.close();
  }
});
