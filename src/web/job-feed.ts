// What a running job's live streams share on this process: one poll of the job and its events,
// whatever number of browsers watch it, and a cap on streams per job and per client. Without
// them, each anonymous stream on a public job page was a poll of its own (300 streams were about
// 1,150 queries a second).
import { type JobEvent, listJobEvents } from "../store/job-events.ts";
import { getJob, type Job, type JobStatus } from "../store/jobs.ts";
import type { Queryable } from "../store/sql.ts";

const BATCH = 200;
/** Events kept for streams that join late; one further behind reads its own way up first. */
const KEPT = 2 * BATCH;

export interface FeedLimits {
  perJob: number;
  perClient: number;
}

export interface Watcher {
  /** The last event id this watcher has. */
  after: number;
  events(events: readonly JobEvent[]): void;
  status(status: JobStatus): void;
  /** The job's tokens and cost: the feed's latest when the watcher joins, then each change. */
  spent(job: Pick<Job, "usage" | "costUsd">): void;
  end(status: JobStatus): void;
}

interface Feed {
  watchers: Set<Watcher>;
  /** The newest event id polled. */
  cursor: number;
  kept: JobEvent[];
  status: JobStatus | undefined;
  /** The job row as last polled, for its tokens and cost. */
  job: Job | undefined;
}

export class JobFeeds {
  private readonly feeds = new Map<number, Feed>();
  /** Streams held per client address, and per job. */
  private readonly clients = new Map<string, number>();
  private readonly streams = new Map<number, number>();

  private readonly db: Queryable;
  private readonly intervalMs: number;
  private readonly limits: FeedLimits;
  /** Waits between polls; tests pass one they drive. */
  private readonly pause: (ms: number) => Promise<void>;

  constructor(
    db: Queryable,
    intervalMs: number,
    limits: FeedLimits,
    pause: (ms: number) => Promise<void> = (ms) =>
      new Promise((resolve) => setTimeout(resolve, ms)),
  ) {
    this.db = db;
    this.intervalMs = intervalMs;
    this.limits = limits;
    this.pause = pause;
  }

  /** A place for one more stream, or undefined when the job or the client has its share. */
  admit(jobId: number, client: string): (() => void) | undefined {
    const held = this.clients.get(client) ?? 0;
    const watching = this.streams.get(jobId) ?? 0;
    if (held >= this.limits.perClient || watching >= this.limits.perJob) return undefined;
    this.clients.set(client, held + 1);
    this.streams.set(jobId, watching + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      less(this.clients, client);
      less(this.streams, jobId);
    };
  }

  /**
   * Adds a watcher: it first reads, by itself, what happened before the feed's kept events, then
   * hears each poll of the shared feed. Returns what removes it.
   */
  async watch(jobId: number, watcher: Watcher): Promise<() => void> {
    let feed = this.feeds.get(jobId);
    if (!feed) {
      feed = {
        watchers: new Set(),
        cursor: watcher.after,
        kept: [],
        status: undefined,
        job: undefined,
      };
      this.feeds.set(jobId, feed);
      this.poll(jobId, feed);
    }
    const current = feed;
    while (watcher.after < (current.kept[0]?.id ?? current.cursor + 1) - 1) {
      const events = await listJobEvents(this.db, jobId, watcher.after, BATCH);
      if (events.length === 0) break;
      watcher.events(events);
      watcher.after = events.at(-1)?.id ?? watcher.after;
    }
    // The feed ended while this watcher caught up: a new one goes on from here.
    if (this.feeds.get(jobId) !== current) return this.watch(jobId, watcher);
    const missed = current.kept.filter((event) => event.id > watcher.after);
    if (missed.length) watcher.events(missed);
    watcher.after = Math.max(watcher.after, current.cursor);
    if (current.job) watcher.spent(current.job);
    current.watchers.add(watcher);
    return () => {
      current.watchers.delete(watcher);
    };
  }

  private poll(jobId: number, feed: Feed): void {
    this.follow(jobId, feed).catch(() => {
      // A failed query ends this feed's streams; browsers reconnect and start a new one.
      for (const watcher of feed.watchers) watcher.end(feed.status ?? "failed");
      this.feeds.delete(jobId);
    });
  }

  private async follow(jobId: number, feed: Feed): Promise<void> {
    while (feed.watchers.size > 0 || feed.status === undefined) {
      // Status first: events written before the job finished are then certain to be read below.
      const job = await getJob(this.db, jobId);
      const events = await listJobEvents(this.db, jobId, feed.cursor, BATCH);
      feed.cursor = events.at(-1)?.id ?? feed.cursor;
      feed.kept = [...feed.kept, ...events].slice(-KEPT);
      const status = job?.status ?? "failed";
      const spent = job && !sameSpending(job, feed.job) ? job : undefined;
      for (const watcher of feed.watchers) {
        const fresh = events.filter((event) => event.id > watcher.after);
        if (fresh.length) watcher.events(fresh);
        watcher.after = Math.max(watcher.after, feed.cursor);
        if (spent) watcher.spent(spent);
        if (feed.status !== undefined && status !== feed.status) watcher.status(status);
      }
      feed.status = status;
      feed.job = job;
      if (!job || (job.finishedAt && events.length < BATCH)) {
        for (const watcher of feed.watchers) watcher.end(status);
        break;
      }
      if (events.length < BATCH) await this.pause(this.intervalMs);
    }
    this.feeds.delete(jobId);
  }
}

/** Whether the job's tokens and cost are as they were; the first poll is news. */
function sameSpending(now: Job, before: Job | undefined): boolean {
  return (
    before !== undefined &&
    now.costUsd === before.costUsd &&
    JSON.stringify(now.usage) === JSON.stringify(before.usage)
  );
}

function less<K>(counts: Map<K, number>, key: K): void {
  const now = (counts.get(key) ?? 1) - 1;
  if (now > 0) counts.set(key, now);
  else counts.delete(key);
}
