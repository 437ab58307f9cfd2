import { z } from "zod";
import { jobEventStored } from "./job-event-signal.ts";
import type { Queryable } from "./sql.ts";
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

export async function appendJobEvent(
  db: Queryable,
  jobId: number,
  type: string,
  data: Record<string, unknown> = {},
): Promise<JobEvent> {
  const [event] = await queryRows(
    db,
    "INSERT INTO job_events (job_id, type, data) VALUES ($1, $2, $3) RETURNING *",
    [jobId, type, JSON.stringify(data)],
    JobEventRow,
    "a new job_events row",
  );
  if (!event) throw new Error(`no job event was stored for job ${jobId}`);
  jobEventStored(jobId);
  return event;
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
