// Webhook intake under load: 200 concurrent connections POST signed issue_comment deliveries, each
// with a unique X-GitHub-Delivery, to the real server and store (role web: verify, dedupe, parse,
// job + enqueue in one transaction, 200). The same load against a Probot server whose handler does
// nothing gives the ratio; each configuration runs three times, interleaved, and the ratios are
// of the medians. Runs on embedded PGlite and on PostgreSQL (TEST_DATABASE_URL, default
// postgres://postgres@127.0.0.1:5432/test; a fresh database is created and dropped).
// Goals: at least 0.5x the no-op's throughput on PostgreSQL and 0.4x on PGlite, at most 1.3x its
// server CPU per delivery; on PostgreSQL a p99 of at most 25 ms. At 200 connections the p99
// part cannot be met on a small machine by any handler: the mean latency is 200 / throughput
// (printed as the queueing floor), about 45 ms for the no-op itself on 2 cores. So the latency
// goal is also checked at 10 connections, where it measures the acknowledgement itself.
//
// The server runs in a child process so the load generator does not share its event loop.
import { fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { constants, PerformanceObserver } from "node:perf_hooks";
import autocannon from "autocannon";
import pg from "pg";
import { createNodeMiddleware, Probot } from "probot";
import { z } from "zod";
import { createLogger } from "../src/log/logger.ts";
import { startServer } from "../src/main.ts";
import { openDatabase } from "../src/store/database.ts";
import { appPrivateKey, testConfig, WEBHOOK_SECRET } from "../test/helpers/app.ts";
import { TYPESCRIPT_FLAGS } from "../test/helpers/typescript.ts";
import { examplePayload, signature } from "../test/helpers/webhooks.ts";
import { threadsCpu } from "./lib/process-usage.ts";

const CONNECTIONS = 200;
const DURATION_S = 10;
const WARMUP_S = 2;
// At 200 connections latency is queueing (Little's law: in flight / throughput), for the no-op
// handler too; a short light-load run shows the latency of one acknowledgement itself.
const LIGHT_CONNECTIONS = 10;
const LIGHT_DURATION_S = 4;
const ROUNDS = 3;

type Mode = { kind: "noop" } | { kind: "vmpilot"; databaseUrl?: string; dataDir?: string };

interface Result {
  p50: number;
  p99: number;
  rate: number;
  ok: number;
  errors: number;
}

// --- child: one server ------------------------------------------------------------------------

/** What the server process has spent so far: its CPU, and its garbage collector's share. */
interface Spent {
  /** All threads, microseconds. */
  cpu: number;
  majorCollections: number;
  /** The collector's pauses of the main thread, milliseconds. */
  pauseMs: number;
  /** V8's helper threads (parallel and concurrent collection), microseconds; 0 without /proc. */
  helpers: number;
}

const GcDetail = z.object({ kind: z.number() });

/**
 * The server's spending as it goes. The collector's share tells the rounds apart: on a 2-core
 * machine the same server on PostgreSQL spent 41-47 us per delivery in V8's helper threads in a
 * window with no major collection, and 93 us in one where they came every second.
 */
function watchSpending(): () => Spent {
  let majorCollections = 0;
  let pauseMs = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      pauseMs += entry.duration;
      // A gc entry's detail, which Node's types leave off PerformanceEntry.
      const detail = GcDetail.safeParse(Reflect.get(entry, "detail")).data;
      if (detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majorCollections++;
    }
  }).observe({ entryTypes: ["gc"] });
  return () => {
    const { user, system } = process.cpuUsage();
    return { cpu: user + system, majorCollections, pauseMs, helpers: threadsCpu("V8") * 1e6 };
  };
}

async function serve(mode: Mode): Promise<void> {
  const logger = createLogger({ level: "info", format: "json" });
  const spent = watchSpending();
  let close: () => Promise<unknown>;
  let url: string;
  let count: () => Promise<number>;
  if (mode.kind === "noop") {
    const probot = new Probot({
      appId: 1,
      privateKey: appPrivateKey(),
      secret: WEBHOOK_SECRET,
      log: logger,
    });
    let received = 0;
    const middleware = await createNodeMiddleware(
      (app) => {
        app.on("issue_comment.created", async () => {
          received++;
        });
      },
      { probot },
    );
    const server = createServer(async (req, res) => {
      if (!(await middleware(req, res))) res.writeHead(404).end();
    });
    server.keepAliveTimeout = 65_000;
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => new Promise((done) => server.close(done));
    count = async () => received;
  } else {
    // A loopback GitHub (via the Enterprise base URL) answers the one GET /app at startup.
    const github = createServer((req, res) => {
      res.writeHead(req.url === "/api/v3/app" ? 200 : 404, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: 1, slug: "vmpilot-bot" }));
    });
    await new Promise<void>((done) => github.listen(0, "127.0.0.1", done));
    const base = `http://127.0.0.1:${(github.address() as AddressInfo).port}/api/v3`;
    const config = testConfig({
      baseUrl: base,
      logLevel: "info",
      databaseUrl: mode.databaseUrl,
      dataDir: mode.dataDir ?? "",
    });
    const db = await openDatabase({
      databaseUrl: config.databaseUrl,
      dataDir: config.dataDir,
      logger,
    });
    const server = await startServer({ config, role: "web", db, logger });
    url = server.url;
    close = async () => {
      await server.close();
      await db.close();
      github.close();
    };
    count = async () =>
      Number((await db.pool.query<{ n: string }>("SELECT count(*) AS n FROM jobs")).rows[0]?.n);
  }
  process.send?.({ url });
  process.on("message", async (message) => {
    if (message === "spent") {
      process.send?.(spent());
      return;
    }
    const handled = await count();
    await close();
    process.send?.({ handled }, () => process.exit(0));
  });
}

// --- load: one process per configuration -----------------------------------------------------

// Each request is a new comment under a new delivery id: the same comment twice is a replay the
// intake drops. The body is built from one serialized template; only the ids and signature change.
const COMMENT_ID_MARK = 987_654_321_012;
let sequence = 0;

function deliveryTemplate(): string {
  const payload = examplePayload("issue_comment", "created");
  payload.installation = { id: 1 };
  payload.comment.id = COMMENT_ID_MARK;
  payload.comment.body = "/vmpilot fix the typo in the README, please";
  return JSON.stringify(payload);
}

function delivery(template: string) {
  const n = ++sequence;
  const body = template.replace(String(COMMENT_ID_MARK), String(n));
  return {
    body,
    headers: {
      "content-type": "application/json",
      "x-github-event": "issue_comment",
      "x-hub-signature-256": signature(body, WEBHOOK_SECRET),
      "x-github-delivery": `bench-${n}`,
    },
  };
}

async function load(url: string, seconds: number, connections: number): Promise<Result> {
  const template = deliveryTemplate();
  const result = await autocannon({
    url: `${url}/api/github/webhooks`,
    method: "POST",
    connections,
    duration: seconds,
    requests: [{ setupRequest: (request) => ({ ...request, ...delivery(template) }) }],
  });
  return {
    p50: result.latency.p50,
    p99: result.latency.p99,
    rate: result.requests.average,
    ok: result["2xx"],
    errors: result.non2xx + result.errors + result.timeouts,
  };
}

/** The load generator's process: loads `url` as each message asks, and answers with the result. */
function generate(url: string): void {
  process.on("message", async (message: { seconds: number; connections: number }) => {
    process.send?.(await load(url, message.seconds, message.connections));
  });
  process.send?.("ready");
}

// --- parent: orchestrate and report -----------------------------------------------------------

interface Measured extends Result {
  handled: number;
  /** The server process's CPU time per delivery in the main run, microseconds. */
  cpuPerDelivery: number;
  /** The main run's major collections; the collector's pauses and helper threads, us/delivery. */
  gc: { major: number; pause: number; helpers: number };
  light: Result;
}

function child(args: string[]) {
  const forked = fork(import.meta.filename, args, {
    // As `npm start` runs the app: on Node's own type stripping where Node has it. Through tsx the
    // server's CPU was tsx's too: its transform wraps every named function in a helper call (some
    // 3 us per delivery) and maps the source of every stack trace.
    execArgv: TYPESCRIPT_FLAGS,
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const next = () =>
    new Promise<unknown>((resolve, reject) => {
      forked.once("message", resolve);
      forked.once("exit", (code) => reject(new Error(`${args[0]} exited with ${code}`)));
    });
  return { process: forked, next };
}

async function measure(mode: Mode): Promise<Measured> {
  const server = child(["--serve", JSON.stringify(mode)]);
  const started = [server];
  try {
    const { url } = (await server.next()) as { url: string };
    // A load generator of its own for each configuration: one process loading one configuration
    // after another was seen to drive the later ones differently (the no-op's CPU per delivery
    // went from 86 to 150 us in its second round, in a row with nothing else between).
    const generator = child(["--load", url]);
    started.push(generator);
    await generator.next();
    const drive = async (seconds: number, connections = CONNECTIONS) => {
      const reply = generator.next();
      generator.process.send({ seconds, connections });
      return (await reply) as Result;
    };
    const spent = async () => {
      const reply = server.next();
      server.process.send("spent");
      return (await reply) as Spent;
    };
    await drive(WARMUP_S, LIGHT_CONNECTIONS);
    // Light load first, on a database that has not just absorbed the full load's tens of thousands
    // of rows: measured after it, the light-load p99 came out about 1.5x longer.
    const light = await drive(LIGHT_DURATION_S, LIGHT_CONNECTIONS);
    await drive(WARMUP_S);
    const before = await spent();
    const result = await drive(DURATION_S);
    const after = await spent();
    const deliveries = Math.max(result.ok + result.errors, 1);
    const cpuPerDelivery = (after.cpu - before.cpu) / deliveries;
    const gc = {
      major: after.majorCollections - before.majorCollections,
      pause: ((after.pauseMs - before.pauseMs) * 1000) / deliveries,
      helpers: (after.helpers - before.helpers) / deliveries,
    };
    const done = server.next();
    server.process.send("stop");
    const { handled } = (await done) as { handled: number };
    return { ...result, handled, cpuPerDelivery, gc, light };
  } finally {
    for (const each of started) each.process.kill();
  }
}

async function freshPostgres(adminUrl: string) {
  const name = `vmpilot_bench_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

const fmt = (r: Result) =>
  `p50 ${r.p50.toFixed(1)} ms  p99 ${r.p99.toFixed(1)} ms  ${r.rate.toFixed(0)} deliveries/s` +
  (r.errors ? `  (${r.errors} errors)` : "");
// Little's law: with every connection always waiting on a reply, the mean latency is the
// connections in flight over the throughput, whatever the handler does.
const floor = (r: Result, connections: number) =>
  `queueing floor ${connections} / ${r.rate.toFixed(0)}/s = ${((connections / r.rate) * 1000).toFixed(1)} ms mean`;
const cpu = (r: Measured) => `server CPU ${r.cpuPerDelivery.toFixed(0)} us/delivery`;
const collector = ({ gc }: Measured) =>
  `collector: ${gc.major} major collections, pauses ${gc.pause.toFixed(0)} us and ` +
  `V8 helper threads ${gc.helpers.toFixed(0)} us per delivery`;
const goal = (met: boolean) => (met ? "met" : "MISSED");

/** The goals on each store against the no-op, PostgreSQL's p99 apart. */
const GOALS: Record<string, { ratio: number; cpu: number }> = {
  "embedded PGlite": { ratio: 0.4, cpu: 1.3 },
  PostgreSQL: { ratio: 0.5, cpu: 1.3 },
};

/** A middle figure of the rounds: one run alone moves too much to compare (see main). */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

async function main() {
  // Every configuration runs ROUNDS times, the rounds interleaved, and the ratios are of the
  // medians: on a 2-core machine one configuration's CPU per delivery was seen moving 25-45 %
  // from one run to the next (the no-op 82-137 us within one benchmark run), more than the goals'
  // margins. Interleaving spreads the machine's drift over every configuration alike.
  const targets: Array<[string, () => Promise<{ mode: Mode; cleanup(): Promise<void> }>]> = [
    ["no-op Probot handler", async () => ({ mode: { kind: "noop" }, cleanup: async () => {} })],
    [
      "embedded PGlite",
      async () => {
        const dataDir = mkdtempSync(join(tmpdir(), "vmpilot-bench-"));
        return {
          mode: { kind: "vmpilot", dataDir },
          cleanup: async () => rmSync(dataDir, { recursive: true, force: true }),
        };
      },
    ],
    [
      "PostgreSQL",
      async () => {
        const db = await freshPostgres(
          process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test",
        );
        return { mode: { kind: "vmpilot", databaseUrl: db.url }, cleanup: () => db.drop() };
      },
    ],
  ];
  const runs = new Map<string, Measured[]>();
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, prepare] of targets) {
      let target: Awaited<ReturnType<typeof prepare>>;
      try {
        target = await prepare();
      } catch (error) {
        if (round === 1) console.log(`intake ${name}: skipped (${(error as Error).message})`);
        continue;
      }
      try {
        const r = await measure(target.mode);
        runs.set(name, [...(runs.get(name) ?? []), r]);
        const goals = name === "PostgreSQL";
        const jobs = target.mode.kind === "vmpilot" ? `  jobs ${r.handled}` : "";
        console.log(
          `intake ${name} (round ${round}): ${fmt(r)}${jobs}  ${cpu(r)}` +
            (goals ? `  goal p99<=25ms ${goal(r.p99 <= 25)}` : ""),
        );
        console.log(`  ${floor(r, CONNECTIONS)}`);
        console.log(`  ${collector(r)}`);
        console.log(
          `  at ${LIGHT_CONNECTIONS} connections: ${fmt(r.light)}` +
            (goals ? `  goal p99<=25ms ${goal(r.light.p99 <= 25)}` : ""),
        );
      } finally {
        await target.cleanup();
      }
    }
  }
  const middle = (name: string) => {
    const measured = runs.get(name) ?? [];
    return {
      rate: median(measured.map((r) => r.rate)),
      cpuPerDelivery: median(measured.map((r) => r.cpuPerDelivery)),
    };
  };
  const noop = middle("no-op Probot handler");
  for (const [name, wanted] of Object.entries(GOALS)) {
    if (!runs.has(name)) continue;
    const r = middle(name);
    const ratio = r.rate / noop.rate;
    const cpuRatio = r.cpuPerDelivery / noop.cpuPerDelivery;
    console.log(
      // Three places: at two, 0.398 printed as 0.40x beside "goal >=0.4x MISSED".
      `${name} against the no-op, medians of ${ROUNDS} rounds: ${ratio.toFixed(3)}x throughput, ${cpuRatio.toFixed(3)}x CPU per delivery` +
        `  goal >=${wanted.ratio}x ${goal(ratio >= wanted.ratio)}, CPU <=${wanted.cpu}x ${goal(cpuRatio <= wanted.cpu)}`,
    );
  }
}

const [role, argument] = process.argv.slice(2);
if (role === "--serve") {
  await serve(JSON.parse(argument as string) as Mode);
} else if (role === "--load") {
  generate(argument as string);
} else {
  await main();
}
