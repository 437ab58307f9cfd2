// Wrong API keys per client address, counted on the database's clock so that every web process
// holds an address back alike. A window starts at an address's first failure and lasts its length.
import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { parseStored, row } from "./stored-value.ts";

const KeyFailuresRow = row({
  /** Failures in the address's current window; 0 when it has none. */
  failures: z.number().int(),
  /** Until the window ends, at least 1. */
  retry_after_seconds: z.number().transform((seconds) => Math.max(1, seconds)),
});
export type KeyFailures = z.output<typeof KeyFailuresRow>;

/** The address's failures in its current window. */
export async function keyFailures(
  db: Queryable,
  address: string,
  windowSeconds: number,
): Promise<KeyFailures> {
  const { rows } = await db.query(
    `SELECT failures,
            ceil(extract(epoch FROM window_start + make_interval(secs => $2) - now()))::integer
              AS retry_after_seconds
       FROM api_key_failures
      WHERE address = $1 AND window_start > now() - make_interval(secs => $2)`,
    [address, windowSeconds],
  );
  if (!rows[0]) return { failures: 0, retryAfterSeconds: 1 };
  return parseStored(KeyFailuresRow, rows[0], "an api_key_failures row");
}

const fresh = z.object({ fresh: z.boolean() });

/** Counts a failure of the address, in a new window when its last one is over. */
export async function countKeyFailure(
  db: Queryable,
  address: string,
  windowSeconds: number,
): Promise<void> {
  const { rows } = await db.query(
    `INSERT INTO api_key_failures AS f (address, window_start, failures) VALUES ($1, now(), 1)
     ON CONFLICT (address) DO UPDATE SET
       window_start = CASE WHEN f.window_start <= now() - make_interval(secs => $2)
                           THEN now() ELSE f.window_start END,
       failures = CASE WHEN f.window_start <= now() - make_interval(secs => $2)
                       THEN 1 ELSE f.failures + 1 END
     RETURNING failures = 1 AS fresh`,
    [address, windowSeconds],
  );
  // Addresses come and go; a new window sweeps the rows whose windows ended long ago.
  if (parseStored(fresh, rows[0], "an api_key_failures row").fresh) {
    await db.query(
      `DELETE FROM api_key_failures
        WHERE window_start < now() - make_interval(secs => $1::double precision * 6)`,
      [windowSeconds],
    );
  }
}
