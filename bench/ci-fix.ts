// Failing CI webhook → the fix job's first model request: a signed check_run delivery (an Actions
// job failed on the head vmpilot pushed last) POSTed to the real server (role all: intake, PGlite
// store, pg-boss queue, worker, the sandbox pipeline with real git against a loopback git server),
// until the Anthropic fake hears the fix's first request. Also counts the GitHub API calls the fix
// makes before that request (goal <= 10). GitHub is a zero-latency loopback stand-in (the app's
// baseUrl points at it). Each run has its own installation and repository, so Probot's write
// throttle per installation does not stack the runs; the model answers that the failure is not the
// code's, so nothing is pushed.
import { execFileSync } from "node:child_process";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger } from "../src/log/logger.ts";
import { startServer } from "../src/main.ts";
import { recordPush } from "../src/store/ci-loop.ts";
import { findOrCreateConversation, linkConversationToPr } from "../src/store/conversations.ts";
import { openDatabase } from "../src/store/database.ts";
import { upsertRepository } from "../src/store/installations.ts";
import { getJob, insertJob, listJobs, updateJob } from "../src/store/jobs.ts";
import { appendMessage } from "../src/store/messages.ts";
import { startAnthropicFake, text } from "../test/helpers/anthropic-fake.ts";
import { APP_SLUG, testConfig, WEBHOOK_SECRET } from "../test/helpers/app.ts";
import { startGitHttpServer } from "../test/helpers/git-http-server.ts";
import { deliver, examplePayload } from "../test/helpers/webhooks.ts";

const RUNS = 8;
const WARMUP = 1;
const PR = 12;
const BRANCH = "vmpilot/issue-4-crash-on-empty-input";
const FAILED_JOB = 555;
const TOKEN = `ghs_${"benchCiFixToken0".repeat(3)}`;
const GOAL_CALLS = 10;

interface Call {
  method: string;
  path: string;
  at: number;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return (
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
  );
}

function sh(cwd: string, script: string): string {
  const env = { PATH: process.env.PATH, GIT_AUTHOR_NAME: "dev", GIT_AUTHOR_EMAIL: "d@e.x" };
  return execFileSync("sh", ["-c", script], {
    cwd,
    encoding: "utf8",
    env: { ...env, GIT_COMMITTER_NAME: "dev", GIT_COMMITTER_EMAIL: "d@e.x" },
  }).trim();
}

// GitHub: what a CI fix asks of it, answered at once. Heads of the pull requests by repository.
const heads = new Map<string, string>();
const calls: Call[] = [];
const problems: string[] = [];
let nextComment = 1;
const LOG = [
  "2025-01-02T10:00:00.0000000Z ##[group]Run sh test.sh",
  '2025-01-02T10:00:00.2000000Z test.sh: expected value.txt to say "fixed", it says "fixd"',
  "2025-01-02T10:00:00.4000000Z ##[error]Process completed with exit code 1.",
].join("\n");

function answer(req: IncomingMessage, path: string, base: string): [number, unknown, object?] {
  const repo = /^\/repos\/([^/]+\/[^/]+)\//.exec(path)?.[1] ?? "";
  const method = req.method ?? "GET";
  const route = `${method} ${path.replace(/^\/repos\/[^/]+\/[^/]+/, "/repo")}`;
  if (route === "GET /app") return [200, { id: 1, slug: APP_SLUG, name: APP_SLUG }];
  if (/^POST \/app\/installations\/\d+\/access_tokens$/.test(route)) {
    return [201, { token: TOKEN, expires_at: new Date(Date.now() + 3_600_000).toISOString() }];
  }
  if (route.startsWith("GET /repo/contents/")) return [404, { message: "Not Found" }];
  if (route === `GET /repo/pulls/${PR}`) {
    const id = Number(repo.split("/app")[1]);
    const side = { id, full_name: repo };
    return [
      200,
      {
        number: PR,
        node_id: "PR_node",
        state: "open",
        draft: true,
        html_url: `https://github.com/${repo}/pull/${PR}`,
        head: { ref: BRANCH, sha: heads.get(repo), repo: side },
        base: { ref: "main", sha: "1".repeat(40), repo: side },
      },
    ];
  }
  if (route === `PATCH /repo/pulls/${PR}`) return [200, { number: PR }];
  if (route === `POST /repo/issues/${PR}/comments`) return [201, { id: nextComment++ }];
  if (/^PATCH \/repo\/issues\/comments\/\d+$/.test(route)) return [200, {}];
  if (/^GET \/repo\/commits\/[0-9a-f]{40}\/check-runs$/.test(route)) {
    const output = { title: null, summary: null, text: null, annotations_count: 0 };
    const run = { id: FAILED_JOB, name: "test", conclusion: "failure", output };
    return [200, { total_count: 1, check_runs: [{ ...run, app: { slug: "github-actions" } }] }];
  }
  // No commit statuses: the repository's CI is GitHub Actions.
  if (/^GET \/repo\/commits\/[0-9a-f]{40}\/status$/.test(route)) {
    return [200, { state: "pending", total_count: 0, statuses: [] }];
  }
  if (route === `GET /repo/actions/jobs/${FAILED_JOB}`) {
    return [200, { name: "test", steps: [{ name: "Run sh test.sh", conclusion: "failure" }] }];
  }
  if (route === `GET /repo/actions/jobs/${FAILED_JOB}/logs`) {
    return [302, "", { location: `${base}/storage/logs/${FAILED_JOB}` }];
  }
  if (route === `GET /storage/logs/${FAILED_JOB}`) {
    if (req.headers.authorization) problems.push("the log storage was sent a token");
    return [200, LOG];
  }
  problems.push(`${route}: no route`);
  return [404, { message: "Not Found" }];
}

const github = createServer((req: IncomingMessage, res: ServerResponse) => {
  const path = new URL(req.url ?? "/", "http://x").pathname.replace(/^\/api\/v3/, "");
  calls.push({ method: req.method ?? "GET", path, at: performance.now() });
  req.resume();
  req.on("end", () => {
    const [status, body, headers = {}] = answer(req, path, githubUrl);
    const json = typeof body !== "string";
    res
      .writeHead(status, { "content-type": json ? "application/json" : "text/plain", ...headers })
      .end(json ? JSON.stringify(body) : body);
  });
});
github.listen(0, "127.0.0.1");
await new Promise((resolve) => github.once("listening", resolve));
const githubUrl = `http://127.0.0.1:${(github.address() as AddressInfo).port}`;

const base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-bench-ci-")));
const git = await startGitHttpServer({ projectRoot: join(base, "served"), token: TOKEN });
const fake = await startAnthropicFake();
const db = await openDatabase({ dataDir: "memory://" });
const server = await startServer({
  config: testConfig({ baseUrl: githubUrl, workerConcurrency: 1 }),
  role: "all",
  db,
  logger: createLogger({ level: "silent", format: "json" }),
  work: {
    anthropic: { apiKey: `sk-ant-api03-${"b".repeat(40)}`, baseURL: fake.url, maxRetries: 0 },
    dataDir: join(base, "data"),
    progressIntervalMs: 60_000,
  },
});

/** Repository `acme/app<n>`: vmpilot's pull request #12 on BRANCH, whose head failed a check. */
async function seed(n: number) {
  const repo = `acme/app${n}`;
  const seedDir = join(base, "seed", `app${n}`);
  sh(base, `git init -q -b main ${seedDir}`);
  sh(seedDir, `echo broken > value.txt && printf '[ "$(cat value.txt)" = fixed ]\\n' > test.sh`);
  sh(seedDir, `git add -A && git commit -qm init && git checkout -qb ${BRANCH}`);
  sh(seedDir, "echo fixd > value.txt && git commit -qam fix");
  const head = sh(seedDir, "git rev-parse HEAD");
  sh(base, `git clone -q --bare ${seedDir} ${join(base, "served", "acme", `app${n}.git`)}`);
  heads.set(repo, head);
  await upsertRepository(db.pool, { id: n, installationId: n, fullName: repo });
  const conversation = await findOrCreateConversation(db.pool, {
    repositoryId: n,
    number: 4,
    kind: "issue",
  });
  const cloneUrl = git.url(`acme/app${n}.git`);
  const asked = await insertJob(db.pool, {
    conversationId: conversation.id,
    installationId: n,
    repositoryId: n,
    repo,
    number: 4,
    trigger: "label",
    command: "fix",
    requester: "octocat",
    context: {
      owner: "acme",
      name: `app${n}`,
      itemKind: "issue",
      title: "Crash on empty input",
      htmlUrl: `https://github.com/${repo}/issues/4`,
      cloneUrl,
      defaultBranch: "main",
      target: { type: "issue" },
      appSlug: APP_SLUG,
      command: "vmpilot",
      requesterId: 583231,
      label: "vmpilot",
    },
  });
  await updateJob(db.pool, asked.id, { status: "succeeded" });
  await appendMessage(db.pool, {
    conversationId: conversation.id,
    role: "user",
    content: "Fix the crash on empty input",
    jobId: asked.id,
  });
  await appendMessage(db.pool, {
    conversationId: conversation.id,
    role: "assistant",
    content: [{ type: "text", text: "value.txt now says fixd." }],
    jobId: asked.id,
  });
  await linkConversationToPr(db.pool, conversation.id, PR, BRANCH);
  await recordPush(db.pool, conversation.id, head, asked.id);

  const payload = examplePayload("check_run", "completed");
  payload.installation = { id: n };
  payload.repository = {
    ...payload.repository,
    id: n,
    name: `app${n}`,
    full_name: repo,
    html_url: `https://github.com/${repo}`,
    clone_url: cloneUrl,
    default_branch: "main",
  };
  const side = { id: n };
  Object.assign(payload.check_run, {
    id: FAILED_JOB,
    head_sha: head,
    conclusion: "failure",
    pull_requests: [
      { number: PR, head: { ref: BRANCH, sha: head, repo: side }, base: { repo: side } },
    ],
  });
  Object.assign(payload.check_run.check_suite, { head_branch: BRANCH, head_sha: head });
  return payload;
}

async function finished(repositoryId: number): Promise<string> {
  for (;;) {
    const [job] = await listJobs(db.pool, { repositoryId, limit: 1 });
    const done = job && (await getJob(db.pool, job.id));
    if (done?.trigger === "ci" && done.finishedAt) return done.status;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

interface Sample {
  firstRequestMs: number;
  apiCalls: number;
  tokens: number;
  routes: string[];
}

async function one(n: number): Promise<Sample> {
  const payload = await seed(n);
  let modelAt = 0;
  fake.push(() => {
    modelAt = performance.now();
    return { content: [text("The check failed on a flaky download; the code needs no change.")] };
  });
  const start = performance.now();
  const response = await deliver(server.url, {
    event: "check_run",
    payload,
    secret: WEBHOOK_SECRET,
  });
  if (response.status !== 200) throw new Error(`delivery answered ${response.status}`);
  const status = await finished(n);
  if (!modelAt) throw new Error(`the fix job ended ${status} without asking the model`);
  const before = calls.filter((c) => c.at >= start && c.at < modelAt);
  const tokens = before.filter((c) => c.path.endsWith("/access_tokens")).length;
  const api = before.filter(
    (c) => !c.path.endsWith("/access_tokens") && !c.path.startsWith("/storage/"),
  );
  return {
    firstRequestMs: modelAt - start,
    apiCalls: api.length,
    tokens,
    routes: api.map((c) => `${c.method} ${c.path.replace(/app\d+/, "{repo}")}`),
  };
}

const samples: Sample[] = [];
for (let i = 0; i < WARMUP + RUNS; i++) {
  const sample = await one(9000 + i);
  if (i >= WARMUP) samples.push(sample);
}

const times = samples.map((s) => s.firstRequestMs);
const counts = samples.map((s) => s.apiCalls);
console.log(`Failing check_run delivery → fix job's first model request (n=${samples.length})`);
console.log(
  `  p50 ${percentile(times, 50).toFixed(0)} ms · p90 ${percentile(times, 90).toFixed(0)} ms · max ${Math.max(...times).toFixed(0)} ms`,
);
const most = Math.max(...counts);
console.log(
  `GitHub API calls per fix before the model starts: ${Math.min(...counts)}–${most} (goal <= ${GOAL_CALLS}: ${most <= GOAL_CALLS ? "met" : "MISSED"}), plus ${samples[0]?.tokens ?? 0} installation token and the log's download from its storage host`,
);
for (const route of samples[0]?.routes ?? []) console.log(`  ${route}`);
if (problems.length > 0 || fake.problems.length > 0) {
  console.log(`problems: ${[...new Set([...problems, ...fake.problems])].join("; ")}`);
}
await server.close();
await db.close();
await fake.close();
await git.close();
github.close();
await rm(base, { recursive: true, force: true });
