// One web process and three worker processes on PostgreSQL: every job delivered as a webhook runs
// to its end exactly once (one job row, its two model steps, one pull request and one comment),
// also when one of the workers is killed with SIGKILL while it holds jobs; pg-boss hands those to
// the others once their heartbeat lapses. bench/scale.ts measures the same setup for throughput.
import { once } from "node:events";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { QueueOptions } from "../../src/jobs/queue/queue.ts";
import type { Database } from "../../src/store/database.ts";
import { databases } from "../helpers/db.ts";
import { type Scale, startScale, type Tally } from "./scale.ts";

// As many jobs as the three workers hold at once, so that each takes some: the smallest run that
// still shows each job once and, killing one worker, none lost. Throughput is bench/scale.ts's.
const CONCURRENCY = 2;
const JOBS = 3 * CONCURRENCY;
// pg-boss presumes a worker dead once its job misses heartbeats this long (10 s is the least).
const QUEUE: Omit<QueueOptions, "logger" | "concurrency"> = {
  heartbeatSeconds: 10,
  superviseIntervalSeconds: 1,
  pollingIntervalSeconds: 0.5,
  retryDelay: 0,
  retryBackoff: false,
};
// What every run shares. Unpaced: Probot's second between an installation's writes would only
// stretch each job.
const WORLD = { jobs: JOBS, concurrency: CONCURRENCY, queue: QUEUE, paced: false };
const postgres = databases().find((target) => target.name === "postgres");

/** Every job once: its row, a final status, one pull request, one comment, nothing left over. */
function expectEachJobOnce(tally: Tally, scale: Scale) {
  expect(tally.jobs).toHaveLength(JOBS);
  expect(new Set(tally.jobs.map((job) => job.number)).size).toBe(JOBS);
  expect(tally.jobs.filter((job) => job.status !== "succeeded")).toEqual([]);
  for (let number = 1; number <= JOBS; number++) {
    expect({ number, pulls: tally.pulls.get(number) }).toEqual({ number, pulls: 1 });
    expect({ number, comments: tally.comments.get(number) }).toEqual({ number, comments: 1 });
  }
  expect(scale.gh.pulls).toHaveLength(JOBS);
  expect(scale.gh.calls.filter((c) => c.method === "POST" && /\/pulls$/.test(c.path))).toHaveLength(
    JOBS,
  );
  expect(scale.gh.problems).toEqual([]);
  expect(scale.fake.problems).toEqual([]);
}

describe.skipIf(!postgres)("one web and three worker processes on PostgreSQL", () => {
  let db: Database;
  let scale: Scale | undefined;

  beforeEach(async () => {
    if (!postgres) throw new Error("these tests run on PostgreSQL only");
    db = await postgres.open();
  });

  afterEach(async () => {
    await scale?.close();
    await db.close();
  });

  it(`runs ${JOBS} webhook-delivered jobs exactly once each`, { timeout: 120_000 }, async () => {
    scale = await startScale(db, { ...WORLD, stepMs: 200 });
    await Promise.all([scale.addWorker(), scale.addWorker(), scale.addWorker()]);
    await scale.deliverAll();
    await scale.allFinished(90_000);

    const tally = await scale.tally();
    expectEachJobOnce(tally, scale);
    expect(tally.jobs.filter((job) => job.attempts !== 1)).toEqual([]);
    for (let number = 1; number <= JOBS; number++) {
      expect({ number, requests: tally.modelRequests.get(number) }).toEqual({
        number,
        requests: 3,
      });
    }
  });

  it("loses no job when one of the three workers is killed mid-run", {
    timeout: 120_000,
  }, async () => {
    // Long steps, so the killed worker surely holds jobs between two model replies.
    scale = await startScale(db, { ...WORLD, stepMs: 500 });
    const [victim] = await Promise.all([scale.addWorker(), scale.addWorker(), scale.addWorker()]);
    await scale.deliverAll();
    const live = scale;
    await expect
      .poll(() => live.runningIn(victim), { timeout: 30_000, interval: 20 })
      .toBeGreaterThan(0);
    victim.process.kill("SIGKILL");
    await once(victim.process, "exit");
    // The ten seconds pg-boss waits before it presumes the victim dead, passed at once.
    expect(await scale.lapseHeartbeats(victim)).toBeGreaterThan(0);
    await scale.allFinished(100_000);

    const tally = await scale.tally();
    expectEachJobOnce(tally, scale);
    const retried = tally.jobs.filter((job) => job.attempts > 1);
    expect(retried.length).toBeGreaterThan(0);
    expect(tally.jobs.filter((job) => job.attempts > 2)).toEqual([]);
    // The jobs the others ran from the start took their two steps and the second look; the
    // taken-over ones more.
    for (const job of tally.jobs) {
      const requests = tally.modelRequests.get(Number(job.number));
      if (job.attempts === 1)
        expect({ job: job.number, requests }).toEqual({ job: job.number, requests: 3 });
      else expect(requests).toBeGreaterThanOrEqual(3);
    }
  });
});
