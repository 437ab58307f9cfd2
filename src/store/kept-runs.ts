// The agent run a job's attempt finished, kept until the job ends (jobs/run/kept.ts says why).
import { z } from "zod";
import { AGENT_EVENTS } from "./job-event-kinds.ts";
import type { Queryable } from "./sql.ts";
import { bigint, queryRows, row } from "./stored-value.ts";

/** What delivery reads of a finished run: its end as logged, the price's standing, the reports. */
const KeptResult = AGENT_EVENTS.finished.data.extend({
  priceKnown: z.boolean(),
  /** What plugin tools reported, e.g. `tests`. */
  reports: z.record(z.string(), z.unknown()),
});

const KeptRunRow = row({
  job_id: bigint,
  /** The attempt that ran the model. */
  attempt: z.number().int(),
  result: KeptResult,
  /** HEAD when the run began; "" in a repository without commits. */
  base_sha: z.string(),
  /** The run's work as one commit on base_sha (turn-bundle.ts); null when it changed nothing. */
  bundle: z.instanceof(Buffer).nullable(),
});
export type KeptRun = z.output<typeof KeptRunRow>;

export async function keepRun(db: Queryable, run: KeptRun): Promise<void> {
  await db.query(
    `INSERT INTO kept_runs (job_id, attempt, result, base_sha, bundle) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (job_id) DO UPDATE
       SET attempt = EXCLUDED.attempt, result = EXCLUDED.result, base_sha = EXCLUDED.base_sha,
           bundle = EXCLUDED.bundle, created_at = now()`,
    [run.jobId, run.attempt, JSON.stringify(KeptResult.parse(run.result)), run.baseSha, run.bundle],
  );
}

export async function getKeptRun(db: Queryable, jobId: number): Promise<KeptRun | undefined> {
  const [kept] = await queryRows(
    db,
    "SELECT * FROM kept_runs WHERE job_id = $1",
    [jobId],
    KeptRunRow,
    `the kept_runs row of job ${jobId}`,
  );
  return kept;
}
