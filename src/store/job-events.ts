import { jobEventStored } from "./job-event-signal.ts";
import type { Queryable } from "./sql.ts";

export interface JobEvent {
  /** Increasing; one job's events are appended in order, so a reader resumes after the last id it saw. */
  id: number;
  jobId: number;
  at: Date;
  type: string;
  data: Record<string, unknown>;
}

interface JobEventRow {
  id: string;
  job_id: string;
  at: Date;
  type: string;
  data: Record<string, unknown>;
}

function toJobEvent(row: JobEventRow): JobEvent {
  return {
    id: Number(row.id),
    jobId: Number(row.job_id),
    at: row.at,
    type: row.type,
    data: row.data,
  };
}

export async function appendJobEvent(
  db: Queryable,
  jobId: number,
  type: string,
  data: Record<string, unknown> = {},
): Promise<JobEvent> {
  const { rows } = await db.query<JobEventRow>(
    "INSERT INTO job_events (job_id, type, data) VALUES ($1, $2, $3) RETURNING *",
    [jobId, type, JSON.stringify(data)],
  );
  jobEventStored(jobId);
  return toJobEvent(rows[0] as JobEventRow);
}

/** In order; afterId resumes after the last event a reader saw. */
export async function listJobEvents(
  db: Queryable,
  jobId: number,
  afterId = 0,
  limit = 1000,
): Promise<JobEvent[]> {
  const { rows } = await db.query<JobEventRow>(
    "SELECT * FROM job_events WHERE job_id = $1 AND id > $2 ORDER BY id LIMIT $3",
    [jobId, afterId, limit],
  );
  return rows.map(toJobEvent);
}
