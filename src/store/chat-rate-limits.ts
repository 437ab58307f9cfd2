// Requests per minute of the chat face, counted in one statement on the database's clock, so every
// web process shares the count (and no two clocks disagree on when a minute is over). The column
// key_id, named when the count was per key, holds whom it counts: "operator" or "user:<GitHub id>".
import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { parseStored, row } from "./stored-value.ts";

const Counted = row({
  requests: z.number().int(),
  /** Until the current minute ends, at least 1. */
  retry_after_seconds: z.number().transform((seconds) => Math.max(1, seconds)),
});

/** Counts a request of someone's: how many their current minute now has, and when it ends. */
export async function countRequest(
  db: Queryable,
  counted: string,
): Promise<z.output<typeof Counted>> {
  const { rows } = await db.query(
    `INSERT INTO chat_rate_limits AS l (key_id, window_start, requests) VALUES ($1, now(), 1)
     ON CONFLICT (key_id) DO UPDATE SET
       window_start = CASE WHEN l.window_start <= now() - interval '1 minute'
                           THEN now() ELSE l.window_start END,
       requests = CASE WHEN l.window_start <= now() - interval '1 minute'
                       THEN 1 ELSE l.requests + 1 END
     RETURNING requests,
       ceil(extract(epoch FROM l.window_start + interval '1 minute' - now()))::integer AS retry_after_seconds`,
    [counted],
  );
  return parseStored(Counted, rows[0], "a chat_rate_limits row");
}
