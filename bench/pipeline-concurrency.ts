// 20 jobs at once in one worker (concurrency 20). vmpilot runs in a child process of its own (the
// real server, role all, with the pg-boss queue), so that its memory and event loop are measured
// alone; this process plays the outside world: each job's repository behind a loopback git server
// (smart HTTP, token auth), a zero-latency loopback GitHub with one installation per repository,
// and a model that takes 2 s per step (three steps: edit, test and report, summary). Every job
// works in a real sandboxed workspace (bwrap) and must end with a pull request.
// Reports the vmpilot process's peak RSS (its bwrap and git children not included) and its event
// loop lag while the jobs run, once on embedded PGlite (file-backed, as `npm start` runs without
// DATABASE_URL; PGlite runs in a process of its own, whose RSS is reported apart) and once on
// PostgreSQL (TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test; a throwaway
// database is created and dropped).
// Goals: peak RSS <= 400 MB, event loop lag p99 <= 50 ms.
import { execFileSync, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, readFile, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { createLogger } from "../src/log/logger.ts";
import { startServer } from "../src/main.ts";
import { openDatabase } from "../src/store/database.ts";
import { startGitHubFake } from "../test/e2e/github-fake.ts";
import { startModelGate } from "../test/e2e/model-gate.ts";
import {
  type FakeReply,
  type RecordedRequest,
  startAnthropicFake,
  text,
  toolUse,
} from "../test/helpers/anthropic-fake.ts";
import { APP_SLUG, testConfig, WEBHOOK_SECRET } from "../test/helpers/app.ts";
import { startGitHttpServer } from "../test/helpers/git-http-server.ts";
import { TYPESCRIPT_FLAGS } from "../test/helpers/typescript.ts";
import { deliver, examplePayload } from "../test/helpers/webhooks.ts";

const JOBS = 20;
const STEP_MS = 2_000;
const DEADLINE_MS = 100_000;
const TOKEN = `ghs_${"benchConcurrencyTok".repeat(2)}`;
const MB = 1024 * 1024;
// The delay histogram records the time between timer ticks; the lag is what exceeds the interval.
const RESOLUTION_MS = 10;

interface ChildSetup {
  githubUrl: string;
  modelUrl: string;
  dataDir: string;
  databaseUrl?: string;
}

interface ChildResult {
  done: number;
  statuses: string;
  peakRunning: number;
  wallS: number;
  idleRssMb: number;
  peakRssMb: number;
  lagP50: number;
  lagP99: number;
  lagMax: number;
  /** The embedded database's process; absent on PostgreSQL. */
  db?: { idleRssMb: number; peakRssMb: number };
}

// --- child: vmpilot ---------------------------------------------------------------------------

/** A /proc/<pid>/status memory line (VmRSS now, VmHWM the peak) in MB. */
async function procMb(pid: number, field: "VmRSS" | "VmHWM"): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kib = status.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"))?.[1];
  if (kib === undefined) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(kib) / 1024;
}

async function child(setup: ChildSetup): Promise<void> {
  const db = await openDatabase({ databaseUrl: setup.databaseUrl, dataDir: setup.dataDir });
  const server = await startServer({
    config: testConfig({ baseUrl: setup.githubUrl, workerConcurrency: JOBS }),
    role: "all",
    db,
    logger: createLogger({ level: "silent", format: "json" }),
    work: {
      anthropic: {
        apiKey: `sk-ant-api03-${"b".repeat(40)}`,
        baseURL: setup.modelUrl,
        maxRetries: 0,
      },
      dataDir: setup.dataDir,
    },
  });
  const idleRss = process.memoryUsage.rss();
  const dbPid = db.embeddedPid;
  const dbIdleRssMb = dbPid === undefined ? 0 : await procMb(dbPid, "VmRSS");
  process.send?.({ url: server.url });
  await once(process, "message");
  const lag = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  lag.enable();
  const started = performance.now();
  let peakRunning = 0;
  let done = 0;
  while (performance.now() - started < DEADLINE_MS) {
    const { rows } = await db.pool.query<{ running: number; done: number }>(
      `SELECT count(*) FILTER (WHERE status = 'running')::int AS running,
              count(*) FILTER (WHERE finished_at IS NOT NULL)::int AS done FROM jobs`,
    );
    peakRunning = Math.max(peakRunning, rows[0]?.running ?? 0);
    done = rows[0]?.done ?? 0;
    if (done === JOBS) break;
    await delay(250);
  }
  const wallS = (performance.now() - started) / 1000;
  lag.disable();
  const { rows } = await db.pool.query<{ status: string; n: number }>(
    "SELECT status, count(*)::int AS n FROM jobs GROUP BY status ORDER BY status",
  );
  const result: ChildResult = {
    done,
    statuses: rows.map((r) => `${r.status} ${r.n}`).join(", "),
    peakRunning,
    wallS,
    idleRssMb: idleRss / MB,
    // ru_maxrss is in KiB: the most this process ever held, startup included.
    peakRssMb: process.resourceUsage().maxRSS / 1024,
    lagP50: lag.percentile(50) / 1e6 - RESOLUTION_MS,
    lagP99: lag.percentile(99) / 1e6 - RESOLUTION_MS,
    lagMax: lag.max / 1e6 - RESOLUTION_MS,
    db:
      dbPid === undefined
        ? undefined
        : { idleRssMb: dbIdleRssMb, peakRssMb: await procMb(dbPid, "VmHWM") },
  };
  await server.close();
  await db.close();
  process.send?.(result, () => process.exit(0));
}

// --- parent: the world around it --------------------------------------------------------------

function sh(cwd: string, script: string): void {
  execFileSync("sh", ["-c", script], {
    cwd,
    env: {
      PATH: process.env.PATH,
      GIT_AUTHOR_NAME: "dev",
      GIT_AUTHOR_EMAIL: "dev@example.com",
      GIT_COMMITTER_NAME: "dev",
      GIT_COMMITTER_EMAIL: "dev@example.com",
    },
  });
}

/** Every job's conversation goes the same way; its step is read off the request. */
function reply(request: RecordedRequest): FakeReply {
  const step = request.body.messages.filter((m: { role: string }) => m.role === "assistant").length;
  if (step === 0) return { content: [toolUse("bash", { command: "echo fixed > value.txt" })] };
  if (step === 1) {
    return {
      content: [
        toolUse("bash", { command: "sh test.sh && echo ok" }),
        toolUse("report_tests", { outcome: "passed", command: "sh test.sh" }),
      ],
    };
  }
  if (step === 2) return { content: [text("Changed value.txt.\n\nSummary: Fix value.txt")] };
  // The second look at the diff before the pull request.
  return { content: [text("Nothing found.")] };
}

async function scenario(store: "pglite" | "postgres", databaseUrl?: string) {
  const base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-bench-concurrency-")));
  const seed = join(base, "seed");
  sh(base, `git init -q -b main ${seed}`);
  sh(
    seed,
    `echo broken > value.txt && printf '[ "$(cat value.txt)" = fixed ]\\n' > test.sh && git add -A && git commit -qm init`,
  );
  for (let i = 0; i < JOBS; i++) sh(base, `git clone -q --bare ${seed} served/acme/app${i}.git`);
  const git = await startGitHttpServer({ projectRoot: join(base, "served"), token: TOKEN });
  const gh = await startGitHubFake({ slug: APP_SLUG, token: TOKEN });
  const fake = await startAnthropicFake(Array.from({ length: JOBS * 4 }, () => reply));
  const model = await startModelGate(fake.url, { delayMs: STEP_MS });
  const setup: ChildSetup = {
    githubUrl: gh.url,
    modelUrl: model.url,
    dataDir: join(base, "data"),
    databaseUrl,
  };
  // As `npm start` runs the app: on Node's own type stripping where Node has it, not through tsx.
  const vmpilot = fork(fileURLToPath(import.meta.url), ["child", JSON.stringify(setup)], {
    execArgv: TYPESCRIPT_FLAGS,
  });
  try {
    const [{ url }] = (await once(vmpilot, "message")) as [{ url: string }];
    vmpilot.send("go");
    await Promise.all(
      Array.from({ length: JOBS }, async (_, i) => {
        const payload = examplePayload("issues", "labeled");
        payload.installation = { id: 700 + i };
        payload.label.name = "vmpilot";
        Object.assign(payload.repository, {
          id: 500 + i,
          name: `app${i}`,
          full_name: `acme/app${i}`,
          owner: { ...payload.repository.owner, login: "acme" },
          clone_url: git.url(`acme/app${i}.git`),
          default_branch: "main",
        });
        const response = await deliver(url, { event: "issues", payload, secret: WEBHOOK_SECRET });
        if (response.status !== 200) throw new Error(`delivery answered ${response.status}`);
      }),
    );
    const [result] = (await once(vmpilot, "message")) as [ChildResult];
    await once(vmpilot, "exit");
    const ok = result.done === JOBS && gh.pulls.length === JOBS;
    console.log(
      `${store}: ${result.done}/${JOBS} jobs finished in ${result.wallS.toFixed(1)} s, at most ${result.peakRunning} running at once (${result.statuses}); ${gh.pulls.length} pull requests, ${fake.requests.length} model requests`,
    );
    console.log(
      `  vmpilot process RSS: ${result.idleRssMb.toFixed(0)} MB idle, ${result.peakRssMb.toFixed(0)} MB peak (goal <= 400 MB: ${result.peakRssMb <= 400 ? "met" : "MISSED"})`,
    );
    if (result.db) {
      console.log(
        `  embedded database process RSS (not in the goal): ${result.db.idleRssMb.toFixed(0)} MB idle, ${result.db.peakRssMb.toFixed(0)} MB peak (with vmpilot's peak: ${(result.peakRssMb + result.db.peakRssMb).toFixed(0)} MB at most)`,
      );
    }
    console.log(
      `  event loop lag: p50 ${result.lagP50.toFixed(1)} ms, p99 ${result.lagP99.toFixed(1)} ms, max ${result.lagMax.toFixed(1)} ms (goal p99 <= 50 ms: ${result.lagP99 <= 50 ? "met" : "MISSED"})`,
    );
    for (const problem of [...gh.problems, ...fake.problems]) console.log(`  problem: ${problem}`);
    return ok;
  } finally {
    if (vmpilot.exitCode === null) vmpilot.kill();
    await model.close();
    await fake.close();
    await gh.close();
    await git.close();
    await rm(base, { recursive: true, force: true });
  }
}

/** A throwaway database on the PostgreSQL server, dropped afterwards. */
async function withPostgres<T>(adminUrl: string, run: (url: string) => Promise<T>): Promise<T> {
  const name = `vmpilot_bench_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  try {
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    return await run(url.toString());
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

if (process.argv[2] === "child") {
  await child(JSON.parse(process.argv[3] as string) as ChildSetup);
} else {
  console.log(
    `${JOBS} jobs at once, worker concurrency ${JOBS}, model ${STEP_MS / 1000} s per step × 3 steps`,
  );
  const adminUrl = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
  const results = [
    await scenario("pglite"),
    await withPostgres(adminUrl, (url) => scenario("postgres", url)),
  ];
  if (results.includes(false)) process.exitCode = 1;
}
