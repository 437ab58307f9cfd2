// Delivery → first GitHub write: from POSTing a signed `issues.labeled` delivery to the real server
// (role all: intake, PGlite store, pg-boss queue, worker with production queue defaults) until the
// 👀 reaction reaches a zero-latency loopback GitHub (the app's baseUrl points at it). Deliveries
// go one after another, each once the previous job has posted its comment. Goal: p50 <= 300 ms.
//
// Two series, because Probot's client throttles writes per installation (at least 1 s between two
// writes, 3 s between two comment or pull request creations): a new installation per delivery
// shows the app's own latency (it includes fetching an installation token); deliveries on one
// installation, back to back, show where that throttle bites (the progress comment, not the 👀).

import { createLogger } from "../src/log/logger.ts";
import { startServer } from "../src/main.ts";
import { openDatabase } from "../src/store/database.ts";
import { type FakeCall, startGitHubFake } from "../test/e2e/github-fake.ts";
import { APP_SLUG, testConfig, WEBHOOK_SECRET } from "../test/helpers/app.ts";
import { deliver, examplePayload } from "../test/helpers/webhooks.ts";

const FRESH = 50;
const SAME = 10;
const WARMUP = 2;
const TOKEN = `ghs_${"benchFirstWriteToken".repeat(2)}`;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return (
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
  );
}

const gh = await startGitHubFake({ slug: APP_SLUG, token: TOKEN });
const db = await openDatabase({ dataDir: "memory://" });
const server = await startServer({
  config: testConfig({ baseUrl: gh.url, workerConcurrency: 2 }),
  role: "all",
  db,
  logger: createLogger({ level: "silent", format: "json" }),
  work: false,
});

/** A job that makes no GitHub call for this long has stopped: the bench says so instead of waiting. */
const STUCK_MS = 60_000;

/** Resolves with the first call for which `match` holds, from now on. */
function nextCall(match: (call: FakeCall) => boolean): Promise<FakeCall> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      gh.off("call", listener);
      reject(new Error(`no matching GitHub call within ${STUCK_MS / 1000} s`));
    }, STUCK_MS);
    const listener = (call: FakeCall) => {
      if (!match(call)) return;
      clearTimeout(timer);
      gh.off("call", listener);
      resolve(call);
    };
    gh.on("call", listener);
  });
}

interface Sample {
  accepted: number;
  pickedUp: number;
  reaction: number;
  comment: number;
}

let issue = 0;
async function one(installation: number): Promise<Sample> {
  const number = ++issue;
  const payload = examplePayload("issues", "labeled");
  payload.installation = { id: installation };
  payload.label.name = "vmpilot";
  payload.issue.number = number;
  // Its own issue: the same issue id and updated_at would make it a replay of the first label.
  payload.issue.id = 1_000_000 + number;
  payload.issue.updated_at = new Date(Date.UTC(2026, 0, 1, 0, 0, number)).toISOString();
  const issuePath = `/repos/Codertocat/Hello-World/issues/${number}`;
  // The worker's first call for a job on a known installation: the requester's permission.
  const permission = nextCall((c) => c.path.endsWith("/permission"));
  const reaction = nextCall((c) => c.path === `${issuePath}/reactions`);
  const comment = nextCall((c) => c.method === "POST" && c.path === `${issuePath}/comments`);
  const start = performance.now();
  const response = await deliver(server.url, {
    event: "issues",
    payload,
    secret: WEBHOOK_SECRET,
  });
  const accepted = performance.now() - start;
  if (response.status !== 200) throw new Error(`delivery answered ${response.status}`);
  return {
    accepted,
    pickedUp: (await permission).at - start,
    reaction: (await reaction).at - start,
    comment: (await comment).at - start,
  };
}

async function series(count: number, installationOf: (i: number) => number) {
  const samples: Sample[] = [];
  for (let i = 0; i < WARMUP + count; i++) {
    const sample = await one(installationOf(i));
    if (i >= WARMUP) samples.push(sample);
  }
  return samples;
}

function report(title: string, samples: Sample[]) {
  const line = (name: string, values: number[]) =>
    `  ${name.padEnd(34)} p50 ${percentile(values, 50).toFixed(1).padStart(7)} ms · p90 ${percentile(values, 90).toFixed(1).padStart(7)} ms · p99 ${percentile(values, 99).toFixed(1).padStart(7)} ms`;
  console.log(`${title} (n=${samples.length})`);
  console.log(
    line(
      "delivery answered 200",
      samples.map((s) => s.accepted),
    ),
  );
  console.log(
    line(
      "permission asked (job picked up)",
      samples.map((s) => s.pickedUp),
    ),
  );
  console.log(
    line(
      "👀 reaction (first write)",
      samples.map((s) => s.reaction),
    ),
  );
  console.log(
    line(
      "progress comment posted",
      samples.map((s) => s.comment),
    ),
  );
}

const started = performance.now();
const fresh = await series(FRESH, (i) => 10_000 + i);
const same = await series(SAME, () => 9_999);
const elapsed = (performance.now() - started) / 1000;

report("New installation per delivery", fresh);
report("One installation, back to back", same);
const p50 = percentile(
  fresh.map((s) => s.reaction),
  50,
);
console.log(
  `delivery → first GitHub write p50 ${p50.toFixed(1)} ms (goal <= 300 ms: ${p50 <= 300 ? "met" : "MISSED"}); ${elapsed.toFixed(1)} s in all`,
);
if (gh.problems.length > 0) console.log(`GitHub fake problems: ${gh.problems.join("; ")}`);
await server.close();
await db.close();
await gh.close();
