// Wakes a reader of a job's events (the chat relay) as soon as this process stores one, instead of
// at its next poll. Events stored by another process, a worker apart from the web process, are
// still found by polling.
import { EventEmitter } from "node:events";

const stored = new EventEmitter();
stored.setMaxListeners(0);
let sequence = 0;
// The sequence number of each job's latest event here; the oldest jobs are forgotten.
const latest = new Map<number, number>();
const REMEMBERED_JOBS = 10_000;

export function jobEventStored(jobId: number): void {
  sequence++;
  latest.delete(jobId);
  latest.set(jobId, sequence);
  if (latest.size > REMEMBERED_JOBS) latest.delete(latest.keys().next().value as number);
  stored.emit(String(jobId));
}

/** Taken before reading a job's events: an event stored after it ends the wait at once. */
export function jobEventMark(): number {
  return sequence;
}

/** Resolves after ms, when this process stores an event of the job after mark, or on abort. */
export function waitForJobEvent(
  jobId: number,
  mark: number,
  ms: number,
  signal: AbortSignal,
): Promise<void> {
  if ((latest.get(jobId) ?? 0) > mark) return Promise.resolve();
  return new Promise((resolve) => {
    const key = String(jobId);
    const done = () => {
      clearTimeout(timer);
      stored.off(key, done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    stored.on(key, done);
    signal.addEventListener("abort", done, { once: true });
  });
}
