// A worker dies mid-job and, restarted, takes the job up again: exactly one pull request and one progress
// comment in the end. The first worker runs in a child process killed with SIGKILL while the model
// is mid-reply; GitHub is a loopback fake both processes reach through the app's baseUrl (as a
// GitHub Enterprise server would be reached), since nock cannot follow into another process. The
// database is PostgreSQL when TEST_DATABASE_URL is set, else PGlite served over its socket. With
// WORKSPACE_ISOLATION=vm on WORKSPACE_ENGINE=fly, the dead worker's Machine (at the Fly API fake) is destroyed by the retry.
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, realpath } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { QueueOptions } from "../../src/jobs/queue/queue.ts";
import type { RunningServer } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { getJob } from "../../src/store/jobs.ts";
import { listMessages } from "../../src/store/messages.ts";
import {
  type AnthropicFake,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import { APP_SLUG, startTestServer, testConfig, WEBHOOK_SECRET } from "../helpers/app.ts";
import { databases, jobFinished, type TestDatabaseTarget } from "../helpers/db.ts";
import { FLY_APP, type FlyFake, startFlyFake } from "../helpers/fly-fake.ts";
import { type GitHttpServer, startGitHttpServer } from "../helpers/git-http-server.ts";
import { removeTree } from "../helpers/remove-tree.ts";
import { spawnServerProcess } from "../helpers/spawn-server.ts";
import { deliver, examplePayload } from "../helpers/webhooks.ts";
import { plain, sh } from "../jobs/pipeline-harness.ts";
import { type GitHubFake, startGitHubFake } from "./github-fake.ts";
import { type ModelGate, startModelGate } from "./model-gate.ts";
import { seedServedRepo, TYPO_ISSUE } from "./remote.ts";

const REPO = "Codertocat/Hello-World";
const TOKEN = `ghs_${"crashTestInstallTok".repeat(2)}`;
const API_KEY = `sk-ant-api03-${"c".repeat(40)}`;
const BRANCH = "vmpilot/issue-1-spelling-error-in-the-readme-file";
// The heartbeat outlasts the test: only the restarted worker recognising its previous instance's
// job (same DATA_DIR, so same worker identity) can explain the job running again.
const QUEUE: Omit<QueueOptions, "logger"> = {
  heartbeatSeconds: 600,
  superviseIntervalSeconds: 1,
  pollingIntervalSeconds: 0.5,
  retryDelay: 0,
  retryBackoff: false,
  concurrency: 1,
};
const target = databases().at(-1) as TestDatabaseTarget;

const workspaces = [
  { isolation: "sandbox", engine: "local" },
  { isolation: "vm", engine: "fly" },
] as const;

describe.each(workspaces)("on isolation $isolation, engine $engine", (workspace) => {
  let base: string;
  let remote: string;
  let git: GitHttpServer;
  let gh: GitHubFake;
  let fake: AnthropicFake;
  let gate: ModelGate;
  let db: Database;
  const servers: RunningServer[] = [];
  let child: ChildProcess | undefined;
  let fly: FlyFake | undefined;

  beforeAll(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-crash-")));
    remote = seedServedRepo(base, REPO);
    git = await startGitHttpServer({ projectRoot: join(base, "served"), token: TOKEN });
    gh = await startGitHubFake({
      slug: APP_SLUG,
      token: TOKEN,
      issues: { [`${REPO}#1`]: TYPO_ISSUE },
    });
    fake = await startAnthropicFake();
    // The first worker's second model request never gets its answer: the worker dies waiting.
    gate = await startModelGate(fake.url, { hold: (index) => index === 1 });
    db = await target.open();
    if (workspace.engine === "fly") {
      fly = await startFlyFake();
      // Both workers read the engine's settings from the environment; the child inherits it.
      vi.stubEnv("FLY_API_TOKEN", fly.token);
      vi.stubEnv("FLY_WORKSPACE_APP", FLY_APP);
      vi.stubEnv("FLY_WORKSPACE_IMAGE", fly.image);
      vi.stubEnv("FLY_API_URL", fly.url);
      vi.stubEnv("WORKSPACE_AGENT_PORT", String(fly.vms.port));
    }
  });

  afterAll(async () => {
    child?.kill("SIGKILL");
    for (const server of servers) await server.close();
    await db?.close();
    vi.unstubAllEnvs();
    await fly?.close();
    await gate?.close();
    await fake?.close();
    await gh?.close();
    await git?.close();
    if (base) await removeTree(base);
  });

  const pipeline = (model: string, dataDir: string) => ({
    anthropic: { apiKey: API_KEY, baseURL: model, maxRetries: 0 },
    dataDir,
    workspace,
    progressIntervalMs: 60_000,
    streamRetryDelayMs: 1,
  });

  /** The first worker, in its own process; resolves once it is taking jobs. */
  async function spawnWorker(): Promise<ChildProcess> {
    const started = await spawnServerProcess({
      config: { baseUrl: gh.url, databaseUrl: db.url, dataDir: join(base, "worker-home") },
      queue: QUEUE,
      work: pipeline(gate.url, join(base, "worker-1")),
    });
    return started.process;
  }

  const calls = (method: string, path: RegExp) =>
    gh.calls.filter((c) => c.method === method && path.test(c.path)).length;

  it(`a worker killed mid-job and restarted takes its job up again at once from the stored conversation, one pull request and one progress comment (${target.name})`, {
    timeout: 90_000,
  }, async () => {
    const config = testConfig({ baseUrl: gh.url });
    servers.push(await startTestServer(db, { config, role: "web", queue: QUEUE }));
    child = await spawnWorker();
    fake.push({
      content: [
        text("Fixing the typo."),
        toolUse("bash", { command: "sed -i 's/Helo/Hello/' README.md" }),
      ],
    });

    const payload = examplePayload("issues", "labeled");
    payload.installation = { id: 31 };
    payload.label.name = "vmpilot";
    payload.repository.clone_url = git.url(`${REPO}.git`);
    const response = await deliver(servers[0]?.url as string, {
      event: "issues",
      payload,
      secret: WEBHOOK_SECRET,
    });
    expect(response.status).toBe(200);
    const { rows } = await db.pool.query<{ id: string; conversation_id: string }>(
      "SELECT id, conversation_id FROM jobs WHERE delivery_id = $1",
      [response.id],
    );
    const jobId = Number(rows[0]?.id);

    // Mid-run: the tool call and its result are stored, the next model reply is on its way.
    expect(await gate.held).toBe(1);
    const beforeCrash = await listMessages(db.pool, Number(rows[0]?.conversation_id));
    expect(beforeCrash.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    child.kill("SIGKILL");
    await once(child, "exit");
    child = undefined;
    expect(await getJob(db.pool, jobId)).toMatchObject({ status: "running", attempts: 1 });

    fake.push(
      (request) => {
        // The stored conversation comes first; the resume note joins the last stored (tool result)
        // turn.
        const messages = request.body.messages.map(plain);
        expect(messages).toHaveLength(3);
        expect(messages.slice(0, 2)).toEqual(beforeCrash.slice(0, 2).map(plain));
        const [stored] = beforeCrash.slice(2).map(plain);
        expect(messages[2].content.slice(0, 1)).toEqual(stored?.content);
        expect(JSON.stringify(messages[2])).toContain(
          "previous attempt of this job was interrupted",
        );
        return { content: [toolUse("bash", { command: "sed -i 's/Helo/Hello/' README.md" })] };
      },
      { content: [toolUse("bash", { command: "sh test.sh && echo ok" })] },
      { content: [toolUse("report_tests", { outcome: "passed", command: "sh test.sh" })] },
      { content: [text("Fixed it.\n\nSummary: Fix Helo typo")] },
      // The second look at the diff before the pull request.
      { content: [text("Nothing found.")] },
    );
    servers.push(
      await startTestServer(db, {
        config: { ...config, dataDir: join(base, "worker-home") },
        role: "worker",
        queue: QUEUE,
        work: pipeline(fake.url, join(base, "worker-2")),
      }),
    );

    const job = await jobFinished(db, jobId);
    expect(job).toMatchObject({ status: "succeeded", attempts: 2, prNumber: 100, branch: BRANCH });
    expect(gh.problems).toEqual([]);
    expect(fake.problems).toEqual([]);
    expect(fake.pending()).toBe(0);
    expect(gh.pulls).toHaveLength(1);
    expect(gh.pulls[0]).toMatchObject({ head: BRANCH, base: "master", draft: true });
    expect(calls("POST", /\/pulls$/)).toBe(1);
    expect(gh.comments).toHaveLength(1);
    expect(calls("POST", /\/comments$/)).toBe(1);
    expect(calls("POST", /\/reactions$/)).toBe(1);
    const final = gh.comments[0]?.bodies.at(-1) ?? "";
    expect(final).toContain("Opened draft pull request #100");
    expect(final).toContain(`<!-- vmpilot:job:${jobId} -->`);
    expect(sh(remote, `git show ${BRANCH}:README.md`)).toBe("Hello World");
    expect(sh(remote, `git rev-list --count master..${BRANCH}`)).toBe("1");
    if (fly) {
      // One Machine per attempt; the retry destroyed the one its dead worker left.
      expect(fly.calls.filter((call) => call.startsWith("POST"))).toHaveLength(2);
      // The job's row says finished before its workspace is disposed (run.ts): its Machine goes
      // just after.
      const vms = fly.vms;
      await vi.waitFor(() => expect(vms.running()).toBe(0), { timeout: 30_000 });
      expect(fly.problems).toEqual([]);
    }
  });
});
