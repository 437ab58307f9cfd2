import { z } from "zod";
import type { Queryable } from "./sql.ts";

const Row = z.object({ status: z.string(), count: z.coerce.number() });
const Oldest = z.object({ age: z.coerce.number().nullable() });

export interface JobCounts {
  /** Jobs not finished yet, by status. */
  unfinished: Record<string, number>;
  /** Seconds the oldest job still waiting for a worker has waited; 0 when none waits. */
  oldestQueuedSeconds: number;
}

/** For metrics: both queries use the index of unfinished jobs, however many jobs have ended. */
export async function jobCounts(db: Queryable): Promise<JobCounts> {
  const rows = await db.query(
    "SELECT status, count(*) AS count FROM jobs WHERE finished_at IS NULL GROUP BY status",
  );
  const unfinished: Record<string, number> = {};
  for (const row of z.array(Row).parse(rows.rows)) unfinished[row.status] = row.count;
  const oldest = await db.query(
    `SELECT extract(epoch FROM now() - min(created_at)) AS age
       FROM jobs WHERE finished_at IS NULL AND status = 'queued'`,
  );
  return { unfinished, oldestQueuedSeconds: Oldest.parse(oldest.rows[0]).age ?? 0 };
}
