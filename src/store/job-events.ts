import type pg from "pg";
import { z } from "zod";
import { jobEventStored } from "./job-event-signal.ts";
import { type Queryable, withTransaction } from "./sql.ts";
import { bigint, queryRows } from "./stored-value.ts";

export interface JobEvent {
  /** Increasing; one job's events are appended in order, so a reader resumes after the last id it saw. */
  id: number;
  jobId: number;
  at: Date;
  type: string;
  /** As stored; readJobEvent (job-event-kinds.ts) reads it for the renderers. */
  data: Record<string, unknown>;
}

/** One kind of event: its type and the zod schema of its data, which types writers and readers. */
export interface JobEventDefinition<
  T extends string = string,
  S extends z.ZodObject = z.ZodObject,
> {
  readonly type: T;
  readonly data: S;
}

export function defineJobEvent<T extends string, S extends z.ZodObject>(
  type: T,
  data: S,
): JobEventDefinition<T, S> {
  return { type, data };
}

const JobEventRow = z
  .object({
    id: bigint,
    job_id: bigint,
    at: z.date(),
    type: z.string(),
    data: z.record(z.string(), z.unknown()),
  })
  .transform(
    (row): JobEvent => ({
      id: row.id,
      jobId: row.job_id,
      at: row.at,
      type: row.type,
      data: row.data,
    }),
  );

/** Stores the data as its definition parses it: fields it does not name are left out. */
export async function appendJobEvent<S extends z.ZodObject>(
  db: Queryable,
  jobId: number,
  event: JobEventDefinition<string, S>,
  data: z.input<S>,
): Promise<JobEvent> {
  const stored = await insertJobEvent(db, jobId, event, data);
  jobEventStored(jobId);
  return stored;
}

/**
 * Appends an event in one transaction with what `alongside` writes, so that no reader sees the
 * event without it; readers in this process are woken once both show.
 */
export async function appendJobEventWith<S extends z.ZodObject>(
  pool: pg.Pool,
  jobId: number,
  event: JobEventDefinition<string, S>,
  data: z.input<S>,
  alongside: (tx: Queryable) => Promise<void>,
): Promise<void> {
  await withTransaction(pool, async (tx) => {
    await insertJobEvent(tx, jobId, event, data);
    await alongside(tx);
  });
  jobEventStored(jobId);
}

async function insertJobEvent<S extends z.ZodObject>(
  db: Queryable,
  jobId: number,
  event: JobEventDefinition<string, S>,
  data: z.input<S>,
): Promise<JobEvent> {
  const [stored] = await queryRows(
    db,
    "INSERT INTO job_events (job_id, type, data) VALUES ($1, $2, $3) RETURNING *",
    [jobId, event.type, JSON.stringify(event.data.parse(data))],
    JobEventRow,
    "a new job_events row",
  );
  if (!stored) throw new Error(`no job event was stored for job ${jobId}`);
  return stored;
}

/** In order; afterId resumes after the last event a reader saw. */
export async function listJobEvents(
  db: Queryable,
  jobId: number,
  afterId = 0,
  limit = 1000,
): Promise<JobEvent[]> {
  return queryRows(
    db,
    "SELECT * FROM job_events WHERE job_id = $1 AND id > $2 ORDER BY id LIMIT $3",
    [jobId, afterId, limit],
    JobEventRow,
    `job_events of job ${jobId}`,
  );
}
