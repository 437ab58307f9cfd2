// Jobs through one web process and worker processes on PostgreSQL, with one, two and three
// workers (test/e2e/scale.ts sets the world up: webhooks signed and delivered to the web process,
// a loopback GitHub and git server, the Anthropic fake answering each of a job's two steps after
// 4 s, workspaces of isolation none). Every worker runs 4 jobs at once, so jobs mostly wait for
// the model.
// Reports per run: jobs/s (first job created to last one finished, by the database's clock), job
// latency p50/p99 (created to finished: all jobs arrive at once, so mostly their wait in the
// queue) and the part of it the job ran (started to finished); the claim latency, how long a job
// waited once a worker had a free slot for it (a slot frees when a job finishes; the first ones
// are free from the start), which a 2-core machine can show where it cannot show more jobs per
// second with more workers; and the CPU each job cost vmpilot's own processes: the worker, its
// process launcher, and what the launcher started (git, and the job's one command) — the fakes,
// in this process, excluded.
// With BENCH_SCALE_STRACE=<jobs>, one more run with one worker under `strace -f` counts the
// processes each job makes and the execve calls that fail (looking a program up along PATH).
// Goals: claim latency p50 within 1 s with any number of workers; at most 0.8 CPU seconds and at
// most 20 processes per job. BENCH_SCALE_JOBS (default 200) and BENCH_SCALE_WORKERS (default
// 1,2,3) make shorter runs. Each run uses a throwaway database on TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/test).

import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { startScale, type Tally } from "../test/e2e/scale.ts";
import { databases, type TestDatabaseTarget } from "../test/helpers/db.ts";
import {
  type Trace,
  traceProcesses,
  type Usage,
  usageOf,
  usageSince,
} from "./lib/process-usage.ts";

const JOBS = Number(process.env.BENCH_SCALE_JOBS ?? 200);
const WORKERS = (process.env.BENCH_SCALE_WORKERS ?? "1,2,3").split(",").filter(Boolean).map(Number);
const TRACED_JOBS = Number(process.env.BENCH_SCALE_STRACE ?? 0);
const STEP_MS = 4_000;
const CONCURRENCY = 4;
const DEADLINE_MS = 20 * 60_000;
const GOAL_CLAIM_S = 1;
const GOAL_CPU_S = 0.8;
const GOAL_PROCESSES = 20;

process.env.TEST_DATABASE_URL ??= "postgres://postgres@127.0.0.1:5432/test";
const postgres = databases().find((target) => target.name === "postgres");

function percentile(sorted: number[], p: number): number {
  return (
    sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN
  );
}

/** Problems that make a run's figures meaningless: jobs lost, failed, or run twice. */
function problems(tally: Tally, jobs: number): string[] {
  const out: string[] = [];
  const unfinished = tally.jobs.filter((job) => job.status !== "succeeded");
  if (tally.jobs.length !== jobs) out.push(`${tally.jobs.length} job rows for ${jobs} deliveries`);
  if (unfinished.length > 0) out.push(`${unfinished.length} jobs did not succeed`);
  for (let number = 1; number <= jobs; number++) {
    if (tally.pulls.get(number) !== 1)
      out.push(`job ${number}: ${tally.pulls.get(number) ?? 0} pull requests`);
    // The work's two steps and its second look at the diff.
    if (tally.modelRequests.get(number) !== 3) {
      out.push(`job ${number}: ${tally.modelRequests.get(number) ?? 0} model requests`);
    }
  }
  return out;
}

/**
 * How long each job waited for a worker once one had a slot free, in ms, sorted. The k-th job to
 * start took the k-th slot to come free: one of the `slots` free from the start, then the one each
 * finished job left, earliest first.
 */
function claimLatencies(tally: Tally, slots: number): number[] {
  const frees = tally.jobs
    .map((job) => job.finishedAt?.getTime() ?? Number.NaN)
    .sort((a, b) => a - b);
  const free = [...Array.from({ length: slots }, () => Number.NEGATIVE_INFINITY), ...frees];
  const starts = tally.jobs
    .filter((job) => job.startedAt !== null)
    .sort((a, b) => (a.startedAt?.getTime() ?? 0) - (b.startedAt?.getTime() ?? 0));
  return starts
    .map((job, k) => {
      const started = job.startedAt?.getTime() ?? Number.NaN;
      return started - Math.max(job.createdAt.getTime(), free[k] ?? Number.NaN);
    })
    .sort((a, b) => a - b);
}

interface RunResult {
  ok: boolean;
  claimP50: number;
  cpuPerJob: number;
  traced?: { processes: number; failedExecs: number };
}

async function run(
  target: TestDatabaseTarget,
  workers: number,
  jobs: number,
  traceTo?: string,
): Promise<RunResult> {
  const db = await target.open();
  const scale = await startScale(db, {
    jobs,
    stepMs: STEP_MS,
    concurrency: CONCURRENCY,
    queue: { pollingIntervalSeconds: 0.5 },
  });
  try {
    const started = await Promise.all(Array.from({ length: workers }, () => scale.addWorker()));
    const pids = started.map((worker) => worker.process.pid ?? 0);
    const before = pids.map(usageOf);
    const trace: Trace | undefined = traceTo
      ? await traceProcesses(pids[0] ?? 0, traceTo)
      : undefined;
    const load = loadavg()[0] ?? 0;
    await scale.deliverAll();
    await scale.allFinished(DEADLINE_MS);
    const traced = await trace?.stop();
    const used = pids.map((pid, i) => usageSince(before[i] as Usage, usageOf(pid)));
    const tally = await scale.tally();
    const found = [...problems(tally, jobs), ...scale.gh.problems, ...scale.fake.problems];
    const seconds = (sorted: number[], p: number) => (percentile(sorted, p) / 1000).toFixed(2);
    const claims = claimLatencies(tally, workers * CONCURRENCY);
    const sum = (pick: (usage: Usage) => number) => used.reduce((all, u) => all + pick(u), 0);
    const perJob = (cpu: number) => (cpu / jobs).toFixed(3);
    const cpu = sum((u) => u.worker + u.launcher + u.started);
    console.log(
      `${workers} worker${workers === 1 ? "" : "s"}${traced ? " (under strace)" : ""}, load ${load.toFixed(1)} at the start: ${tally.jobsPerSecond.toFixed(2)} jobs/s; latency p50 ${seconds(tally.latenciesMs, 50)} s, p99 ${seconds(tally.latenciesMs, 99)} s (of which running p50 ${seconds(tally.runsMs, 50)} s, p99 ${seconds(tally.runsMs, 99)} s); claim latency p50 ${seconds(claims, 50)} s, p99 ${seconds(claims, 99)} s; ${tally.jobs.length} jobs, ${scale.gh.pulls.length} pull requests, ${scale.fake.requests.length} model requests`,
    );
    console.log(
      `  CPU per job: ${perJob(cpu)} s (worker ${perJob(sum((u) => u.worker))}, launcher ${perJob(sum((u) => u.launcher))}, git and commands ${perJob(sum((u) => u.started))})`,
    );
    if (traced) {
      console.log(
        `  per job: ${(traced.processes / jobs).toFixed(1)} processes, ${(traced.failedExecs / jobs).toFixed(1)} failed execve calls`,
      );
    }
    for (const problem of found.slice(0, 10)) console.log(`  problem: ${problem}`);
    return {
      ok: found.length === 0,
      claimP50: percentile(claims, 50) / 1000,
      cpuPerJob: cpu / jobs,
      traced: traced && {
        processes: traced.processes / jobs,
        failedExecs: traced.failedExecs / jobs,
      },
    };
  } finally {
    await scale.close();
    await db.close();
  }
}

const met = (ok: boolean) => (ok ? "met" : "MISSED");

console.log(
  `${JOBS} jobs, ${CONCURRENCY} at once per worker process, model ${STEP_MS / 1000} s per step × 2 steps`,
);
if (!postgres) throw new Error("TEST_DATABASE_URL names no PostgreSQL server");
const results: RunResult[] = [];
for (const workers of WORKERS) results.push(await run(postgres, workers, JOBS));
if (results.length > 0) {
  const worstClaim = Math.max(...results.map((r) => r.claimP50));
  const worstCpu = Math.max(...results.map((r) => r.cpuPerJob));
  console.log(
    `claim latency p50, worst of ${WORKERS.join(", ")} workers: ${worstClaim.toFixed(2)} s (goal ≤ ${GOAL_CLAIM_S} s: ${met(worstClaim <= GOAL_CLAIM_S)})`,
  );
  console.log(
    `CPU per job, worst run: ${worstCpu.toFixed(3)} s (goal ≤ ${GOAL_CPU_S} s: ${met(worstCpu <= GOAL_CPU_S)})`,
  );
}
if (TRACED_JOBS > 0) {
  const dir = await mkdtemp(join(tmpdir(), "vmpilot-bench-strace-"));
  try {
    const traced = await run(postgres, 1, TRACED_JOBS, join(dir, "trace"));
    results.push(traced);
    const processes = traced.traced?.processes ?? Number.NaN;
    console.log(
      `processes per job: ${processes.toFixed(1)} (goal ≤ ${GOAL_PROCESSES}: ${met(processes <= GOAL_PROCESSES)})`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
if (results.some((r) => !r.ok)) process.exitCode = 1;
