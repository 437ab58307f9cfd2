// A job's live streams share one poll, and streams are capped per job and per client. The polls are
// driven by hand, so the counts are exact.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Database } from "../../src/store/database.ts";
import { Text } from "../../src/store/job-event-kinds.ts";
import { appendJobEvent, type JobEvent } from "../../src/store/job-events.ts";
import { type Job, updateJob } from "../../src/store/jobs.ts";
import type { Queryable } from "../../src/store/sql.ts";
import { JobFeeds, type Watcher } from "../../src/web/job-feed.ts";
import { databases, seedConversation, seedJob } from "../helpers/db.ts";

let db: Database;
beforeAll(async () => {
  db = await (databases()[0]?.open() ?? Promise.reject(new Error("no database")));
});
afterAll(() => db?.close());

/** Counts the queries that reach the database. */
function counting(): { db: Queryable; queries: () => number } {
  let n = 0;
  const pool = new Proxy(db.pool, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (property !== "query" || typeof value !== "function") return value;
      return (...args: unknown[]) => {
        n++;
        return Reflect.apply(value, target, args);
      };
    },
  });
  return { db: pool, queries: () => n };
}

/** A pause the test releases, one poll at a time. */
function handDriven() {
  const waiting: Array<() => void> = [];
  let arrived: (() => void) | undefined;
  return {
    pause: () =>
      new Promise<void>((resolve) => {
        waiting.push(resolve);
        arrived?.();
      }),
    /** Waits until the feed has polled and pauses again. */
    async polled(): Promise<void> {
      if (waiting.length === 0) await new Promise<void>((resolve) => (arrived = resolve));
    },
    /** Lets the paused feed poll once more. */
    next: () => waiting.shift()?.(),
  };
}

function watcher(after = 0) {
  const seen: number[] = [];
  const statuses: string[] = [];
  const costs: number[] = [];
  let ended: (status: string) => void = () => {};
  const end = new Promise<string>((resolve) => (ended = resolve));
  const w: Watcher = {
    after,
    events: (events: readonly JobEvent[]) => seen.push(...events.map((e) => e.id)),
    status: (s) => statuses.push(s),
    spent: (job) => costs.push(job.costUsd),
    end: (s) => ended(s),
  };
  return { w, seen, statuses, costs, end };
}

async function runningJob(): Promise<Job> {
  const job = await seedJob(db, (await seedConversation(db)).conversation);
  await updateJob(db.pool, job.id, { status: "running" });
  return job;
}

describe("live job streams", () => {
  it("serve 300 watchers of one job with one poll, each event and each change of its cost to each watcher once", async () => {
    const job = await runningJob();
    const first = (await appendJobEvent(db.pool, job.id, Text, { text: "a" })).id;
    const counter = counting();
    const clock = handDriven();
    const feeds = new JobFeeds(counter.db, 500, { perJob: 1000, perClient: 1000 }, clock.pause);
    const watchers = Array.from({ length: 300 }, () => watcher());
    for (const { w } of watchers) await feeds.watch(job.id, w);
    await clock.polled();
    const second = (await appendJobEvent(db.pool, job.id, Text, { text: "b" })).id;
    await updateJob(db.pool, job.id, { costUsd: 0.0081, usage: { outputTokens: 12 } });
    const before = counter.queries();
    clock.next();
    await clock.polled();
    // One poll: the job's row (status, tokens, cost) and its new events, whatever number of watchers.
    expect(counter.queries() - before).toBe(2);
    for (const { seen, costs } of watchers) {
      expect(seen).toEqual([first, second]);
      expect(costs).toEqual([0, 0.0081]);
    }
    // Nothing moved: nothing is sent again.
    clock.next();
    await clock.polled();
    for (const { costs } of watchers) expect(costs).toEqual([0, 0.0081]);

    await updateJob(db.pool, job.id, { status: "succeeded" });
    clock.next();
    for (const { statuses, end } of watchers) {
      expect(await end).toBe("succeeded");
      expect(statuses).toEqual(["succeeded"]);
    }
  });

  it("give a late watcher what it missed, from the kept events or read by itself", async () => {
    const job = await runningJob();
    const ids: number[] = [];
    for (const text of ["a", "b", "c"]) {
      ids.push((await appendJobEvent(db.pool, job.id, Text, { text })).id);
    }
    const clock = handDriven();
    const feeds = new JobFeeds(db.pool, 500, { perJob: 10, perClient: 10 }, clock.pause);
    // The first watcher resumes after the second event; the feed starts there.
    const early = watcher(ids[1]);
    await feeds.watch(job.id, early.w);
    await clock.polled();
    const late = watcher(0);
    await feeds.watch(job.id, late.w);
    const d = (await appendJobEvent(db.pool, job.id, Text, { text: "d" })).id;
    clock.next();
    await clock.polled();
    expect(early.seen).toEqual([ids[2], d]);
    expect(late.seen).toEqual([...ids, d]);
    // The late one got the cost the feed knew when it joined, once.
    expect(late.costs).toEqual([0]);
  });

  it("cap streams per client and per job, and give a place back when a stream ends", () => {
    const feeds = new JobFeeds(db.pool, 500, { perJob: 50, perClient: 2 });
    const a = feeds.admit(1, "198.51.100.7");
    const b = feeds.admit(2, "198.51.100.7");
    expect(a && b).toBeTruthy();
    expect(feeds.admit(3, "198.51.100.7")).toBeUndefined();
    expect(feeds.admit(3, "203.0.113.9")).toBeDefined();
    a?.();
    a?.(); // twice is once
    expect(feeds.admit(3, "198.51.100.7")).toBeDefined();
    expect(feeds.admit(4, "198.51.100.7")).toBeUndefined();
    const one = new JobFeeds(db.pool, 500, { perJob: 3, perClient: 100 });
    for (const client of ["a", "b", "c"]) expect(one.admit(7, client)).toBeDefined();
    expect(one.admit(7, "d")).toBeUndefined();
    expect(one.admit(8, "d")).toBeDefined();
  });
});
