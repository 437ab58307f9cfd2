// 200 jobs through one web process and worker processes on PostgreSQL, once with one worker and
// once with three (test/e2e/scale.ts sets the world up: webhooks signed and delivered to the web
// process, a loopback GitHub and git server, the Anthropic fake answering each of a job's two
// turns after 4 s, workspaces on the host provider). Every worker runs 4 jobs at once, so jobs
// mostly wait for the model and more workers should mean proportionally more jobs per second.
// Reports jobs/s (first job created to last one finished, by the database's clock), job latency
// p50/p99 (created to finished: all jobs arrive at once, so mostly their wait in the queue) and
// the part of it the job ran (started to finished), and the ratio of three workers' throughput to
// one's.
// Goal: ratio >= 2.5. Each run uses a throwaway database on TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test).

import { startScale, type Tally } from "../test/e2e/scale.ts";
import { databases, type TestDatabaseTarget } from "../test/helpers/db.ts";

const JOBS = 200;
const TURN_MS = 4_000;
const CONCURRENCY = 4;
const DEADLINE_MS = 20 * 60_000;

process.env.TEST_DATABASE_URL ??= "postgres://postgres@127.0.0.1:5432/test";
const postgres = databases().find((target) => target.name === "postgres");

function percentile(sorted: number[], p: number): number {
  return (
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
  );
}

/** Problems that make a run's figures meaningless: jobs lost, failed, or run twice. */
function problems(tally: Tally): string[] {
  const out: string[] = [];
  const unfinished = tally.jobs.filter((job) => job.status !== "succeeded");
  if (tally.jobs.length !== JOBS) out.push(`${tally.jobs.length} job rows for ${JOBS} deliveries`);
  if (unfinished.length > 0) out.push(`${unfinished.length} jobs did not succeed`);
  for (let number = 1; number <= JOBS; number++) {
    if (tally.pulls.get(number) !== 1)
      out.push(`job ${number}: ${tally.pulls.get(number) ?? 0} pull requests`);
    if (tally.modelRequests.get(number) !== 2) {
      out.push(`job ${number}: ${tally.modelRequests.get(number) ?? 0} model requests`);
    }
  }
  return out;
}

async function run(
  target: TestDatabaseTarget,
  workers: number,
): Promise<{ tally: Tally; ok: boolean }> {
  const db = await target.open();
  const scale = await startScale(db, {
    jobs: JOBS,
    turnMs: TURN_MS,
    concurrency: CONCURRENCY,
    queue: { pollingIntervalSeconds: 0.5 },
  });
  try {
    await Promise.all(Array.from({ length: workers }, () => scale.addWorker()));
    await scale.deliverAll();
    await scale.allFinished(DEADLINE_MS);
    const tally = await scale.tally();
    const found = [...problems(tally), ...scale.gh.problems, ...scale.fake.problems];
    const seconds = (sorted: number[], p: number) => (percentile(sorted, p) / 1000).toFixed(1);
    console.log(
      `${workers} worker${workers === 1 ? "" : "s"}: ${tally.jobsPerSecond.toFixed(2)} jobs/s; latency p50 ${seconds(tally.latenciesMs, 50)} s, p99 ${seconds(tally.latenciesMs, 99)} s (of which running p50 ${seconds(tally.runsMs, 50)} s, p99 ${seconds(tally.runsMs, 99)} s); ${tally.jobs.length} jobs, ${scale.gh.pulls.length} pull requests, ${scale.fake.requests.length} model requests`,
    );
    for (const problem of found.slice(0, 10)) console.log(`  problem: ${problem}`);
    return { tally, ok: found.length === 0 };
  } finally {
    await scale.close();
    await db.close();
  }
}

console.log(
  `${JOBS} jobs, ${CONCURRENCY} at once per worker process, model ${TURN_MS / 1000} s per turn × 2 turns`,
);
if (!postgres) throw new Error("TEST_DATABASE_URL names no PostgreSQL server");
const one = await run(postgres, 1);
const three = await run(postgres, 3);
const ratio = three.tally.jobsPerSecond / one.tally.jobsPerSecond;
console.log(
  `3 workers / 1 worker: ${ratio.toFixed(2)}× (goal >= 2.5×: ${ratio >= 2.5 ? "met" : "MISSED"})`,
);
if (!one.ok || !three.ok) process.exitCode = 1;
