// Many jobs through separate processes, for test/e2e/scale.test.ts and bench/scale.ts: one web
// process taking signed webhooks and worker processes running the jobs, all on one database, each
// in its own `node` (test/e2e/worker-process.ts). Around them, in this process: a loopback GitHub,
// a loopback git server with the repositories, and the Anthropic fake behind a gate that answers
// each step after a fixed delay, so that a job mostly waits for the model as real ones do. Every
// job is an issue of its own, labeled for a fix: the model writes the file with the editor and has
// the repository's test run, then sums up; the worker pushes the branch and opens a pull request.
// Workspaces have isolation none, so that hundreds of jobs on a small machine measure the queue
// and the processes rather than the sandbox.
import type { ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readdir, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Config } from "../../src/config/env.ts";
import type { QueueOptions } from "../../src/jobs/queue/queue.ts";
import type { Role } from "../../src/roles/startup.ts";
import type { Database } from "../../src/store/database.ts";
import { type Job, listJobs } from "../../src/store/jobs.ts";
import {
  type AnthropicFake,
  type FakeReply,
  type RecordedRequest,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import { APP_SLUG, WEBHOOK_SECRET } from "../helpers/app.ts";
import { type GitHttpServer, startGitHttpServer } from "../helpers/git-http-server.ts";
import { spawnServerProcess } from "../helpers/spawn-server.ts";
import { deliver, examplePayload } from "../helpers/webhooks.ts";
import { sh } from "../jobs/pipeline-harness.ts";
import { type GitHubFake, startGitHubFake } from "./github-fake.ts";
import { type ModelGate, startModelGate } from "./model-gate.ts";
import { seedServedRepo } from "./remote.ts";

const TOKEN = `ghs_${"scaleTestInstallTok".repeat(2)}`;
const API_KEY = `sk-ant-api03-${"s".repeat(40)}`;
const TITLE = /Scale job (\d+)\./;
const RESUMED = "previous attempt of this job was interrupted";
const SECOND_LOOK = "take a second look";
// Webhooks in flight at once, as GitHub would send a burst.
const DELIVERY_BATCH = 20;

// Job n is issue #n of one of a few repositories, each its own installation: Probot paces each
// installation's writes within a process (one a second, a new comment every three seconds),
// which with a single installation would be all this measured.
const REPOS = 10;
const repoIndex = (job: number) => ((job - 1) % REPOS) + 1;
const repoOf = (job: number) => `acme/app${repoIndex(job)}`;

export interface ScaleOptions {
  jobs: number;
  /** How long the model takes per step; two steps a job. */
  stepMs: number;
  /** Jobs one worker process runs at once. */
  concurrency: number;
  /** Queue tuning for every process (polling, heartbeat, retries). */
  queue: Omit<QueueOptions, "logger" | "concurrency">;
  /** Probot's pacing of each installation's writes, a second apart. Default on, as in production. */
  paced?: boolean;
}

export interface ScaleWorker {
  process: ChildProcess;
  /** Where its job workspaces appear while they run. */
  dataDir: string;
}

/** What came of the jobs, per job number where it can be told apart. */
export interface Tally {
  /** Rows in jobs, oldest first. */
  jobs: Job[];
  /** Model requests per job number. */
  modelRequests: Map<number, number>;
  /** Pull requests opened per job number (the issue number in the head branch). */
  pulls: Map<number, number>;
  /** Comments the app posted per job (issue) number. */
  comments: Map<number, number>;
  /** Jobs per second from the first job's creation to the last one's end. */
  jobsPerSecond: number;
  /** Job latency (created to finished) in ms, sorted. */
  latenciesMs: number[];
  /** Time a job ran (started to finished) in ms, sorted: its latency without the wait in the queue. */
  runsMs: number[];
}

export interface Scale {
  gh: GitHubFake;
  fake: AnthropicFake;
  workers: ScaleWorker[];
  /** Starts one more worker process; resolves once it takes jobs. */
  addWorker(): Promise<ScaleWorker>;
  /** Sends every job's webhook to the web process; throws unless each is answered 200. */
  deliverAll(): Promise<void>;
  /** Resolves once every job has ended (or throws after timeoutMs). */
  allFinished(timeoutMs: number): Promise<void>;
  /** Jobs running right now in a worker (their workspaces are open). */
  runningIn(worker: ScaleWorker): Promise<number>;
  /**
   * For a worker that is dead: moves its running jobs' last heartbeats back by the heartbeat time,
   * as the wait for them to lapse would, so the live processes' supervisors hand them on at once.
   * Returns how many it moved.
   */
  lapseHeartbeats(worker: ScaleWorker): Promise<number>;
  tally(): Promise<Tally>;
  close(): Promise<void>;
}

/** The model's side of every job, told apart by the step (and by a resume after a crash). */
function reply(request: RecordedRequest): FakeReply {
  const messages: unknown[] = request.body.messages;
  const step = messages.filter((m) => (m as { role: string }).role === "assistant").length;
  // A resumed job starts on a fresh checkout: the earlier attempt's edit is gone, so make it again.
  if (step === 0 || JSON.stringify(messages.at(-1)).includes(RESUMED)) {
    return {
      content: [
        toolUse("str_replace_based_edit_tool", {
          command: "create",
          path: "README.md",
          file_text: "Hello World\n",
        }),
        toolUse("report_tests", { outcome: "passed", command: "sh test.sh" }),
      ],
    };
  }
  // The second look at the diff before the pull request (second-look.ts) finds nothing.
  if (JSON.stringify(messages.at(-1)).includes(SECOND_LOOK)) {
    return { content: [text("Nothing found.")] };
  }
  return { content: [text("Fixed the typo.\n\nSummary: Fix Helo typo")] };
}

function jobOf(request: RecordedRequest): number {
  return Number(TITLE.exec(JSON.stringify(request.body.messages[0]))?.[1] ?? 0);
}

function countBy<T>(items: T[], key: (item: T) => number): Map<number, number> {
  const counts = new Map<number, number>();
  for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
  return counts;
}

function spawnServer(
  role: Role,
  options: {
    config: Partial<Config>;
    queue: ScaleOptions["queue"];
    paced?: boolean;
    work?: object;
  },
): Promise<{ process: ChildProcess; url: string }> {
  return spawnServerProcess({ role, ...options });
}

/** Starts the world and the web process on `db` (a fresh database); add workers after. */
export async function startScale(db: Database, options: ScaleOptions): Promise<Scale> {
  const base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-scale-")));
  const stops: Array<() => Promise<unknown>> = [() => rm(base, { recursive: true, force: true })];
  const children: ChildProcess[] = [];
  const workers: ScaleWorker[] = [];
  const close = async () => {
    for (const child of children) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      child.kill("SIGKILL");
      await once(child, "exit");
    }
    for (const stop of stops.reverse()) await stop();
  };
  try {
    const first = seedServedRepo(base, repoOf(1));
    sh(
      base,
      `for n in $(seq 2 ${REPOS}); do git clone -q --bare ${first} served/acme/app$n.git; done`,
    );
    const git: GitHttpServer = await startGitHttpServer({
      projectRoot: join(base, "served"),
      token: TOKEN,
    });
    stops.push(() => git.close());
    const issues = Object.fromEntries(
      Array.from({ length: options.jobs }, (_, i) => [
        `${repoOf(i + 1)}#${i + 1}`,
        { title: `Scale job ${i + 1}`, body: `Scale job ${i + 1}. Helo?`, user: "Codertocat" },
      ]),
    );
    const gh = await startGitHubFake({ slug: APP_SLUG, token: TOKEN, issues });
    stops.push(() => gh.close());
    // Replies for every step of every job, and for the steps a crashed job repeats.
    const fake = await startAnthropicFake(Array.from({ length: options.jobs * 5 }, () => reply));
    stops.push(() => fake.close());
    const gate: ModelGate = await startModelGate(fake.url, { delayMs: options.stepMs });
    stops.push(() => gate.close());

    const config = { baseUrl: gh.url, databaseUrl: db.url, workerConcurrency: options.concurrency };
    const { queue, paced } = options;
    const web = await spawnServer("web", { config, queue, paced });
    children.push(web.process);

    let started = 0;
    const addWorker = async (): Promise<ScaleWorker> => {
      // Counted before the process is up: workers started together each get a data dir of their own.
      const dataDir = join(base, `worker-${++started}`);
      const work = {
        anthropic: { apiKey: API_KEY, baseURL: gate.url, maxRetries: 0 },
        dataDir,
        workspace: { isolation: "none", engine: "local" },
        // One comment edit at the start and one at the end: progress edits would only add noise.
        progressIntervalMs: 60_000,
        streamRetryDelayMs: 1,
      };
      const child = await spawnServer("worker", { config, queue, paced, work });
      children.push(child.process);
      const worker = { process: child.process, dataDir };
      workers.push(worker);
      return worker;
    };

    const deliverAll = async () => {
      for (let first = 1; first <= options.jobs; first += DELIVERY_BATCH) {
        const last = Math.min(options.jobs, first + DELIVERY_BATCH - 1);
        const numbers = Array.from({ length: last - first + 1 }, (_, i) => first + i);
        await Promise.all(
          numbers.map(async (number) => {
            const payload = examplePayload("issues", "labeled");
            const repo = repoOf(number);
            payload.installation = { id: 1000 + repoIndex(number) };
            payload.label.name = "vmpilot";
            // Its own issue id too: the intake takes the same label event on one issue once.
            Object.assign(payload.issue, {
              id: 900_000 + number,
              number,
              title: `Scale job ${number}`,
            });
            Object.assign(payload.repository, {
              id: 5000 + repoIndex(number),
              name: repo.split("/")[1],
              full_name: repo,
              owner: { ...payload.repository.owner, login: "acme" },
              clone_url: git.url(`${repo}.git`),
            });
            const response = await deliver(web.url, {
              event: "issues",
              payload,
              secret: WEBHOOK_SECRET,
            });
            if (response.status !== 200) {
              throw new Error(`the delivery of job ${number} was answered ${response.status}`);
            }
          }),
        );
      }
    };

    const jobs = () => listJobs(db.pool, { limit: options.jobs * 2 });

    const allFinished = async (timeoutMs: number) => {
      const deadline = performance.now() + timeoutMs;
      for (;;) {
        const all = await jobs();
        const done = all.filter((job) => job.finishedAt !== null).length;
        if (all.length >= options.jobs && done === all.length) return;
        if (performance.now() > deadline) {
          throw new Error(`${done} of ${options.jobs} jobs finished in ${timeoutMs} ms`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };

    const runningIn = async (worker: ScaleWorker) =>
      (await readdir(join(worker.dataDir, "workspaces")).catch(() => [])).length;

    const lapseHeartbeats = async (worker: ScaleWorker) => {
      // A dead worker's jobs are those whose workspaces it left: job-<id>-<attempt>.
      const held = (await readdir(join(worker.dataDir, "workspaces")).catch(() => []))
        .map((name) => Number(/^job-(\d+)-\d+$/.exec(name)?.[1]))
        .filter(Number.isSafeInteger);
      const { rowCount } = await db.pool.query(
        `UPDATE pgboss.job SET heartbeat_on = heartbeat_on - heartbeat_seconds * interval '1 second'
         WHERE state = 'active'
           AND id IN (SELECT queue_job_id FROM jobs WHERE id = ANY($1) AND finished_at IS NULL)`,
        [held],
      );
      return rowCount ?? 0;
    };

    const tally = async (): Promise<Tally> => {
      const all = (await jobs()).reverse();
      const first = Math.min(...all.map((job) => job.createdAt.getTime()));
      const end = (job: Job) => job.finishedAt?.getTime() ?? Number.NaN;
      const last = Math.max(...all.map(end));
      return {
        jobs: all,
        modelRequests: countBy(fake.requests, jobOf),
        pulls: countBy(gh.pulls, (pull) => Number(/issue-(\d+)-/.exec(pull.head)?.[1] ?? 0)),
        comments: countBy(gh.comments, (comment) => comment.issue),
        jobsPerSecond: (all.length * 1000) / (last - first),
        latenciesMs: all.map((job) => end(job) - job.createdAt.getTime()).sort((a, b) => a - b),
        runsMs: all
          .map((job) => end(job) - (job.startedAt?.getTime() ?? Number.NaN))
          .sort((a, b) => a - b),
      };
    };

    return {
      gh,
      fake,
      workers,
      addWorker,
      deliverAll,
      allFinished,
      runningIn,
      lapseHeartbeats,
      tally,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
