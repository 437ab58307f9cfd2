// Requests per key per minute of the chat face, counted in one statement on the database's clock,
// so every web process shares the count (and no two clocks disagree on when a minute is over).
import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { parseStored } from "./stored-value.ts";

const counted = z.object({ requests: z.number().int(), retry_after: z.number() });

/** Counts a request of the key: how many its current minute now has, and when that minute ends. */
export async function countRequest(
  db: Queryable,
  keyId: string,
): Promise<{ requests: number; retryAfterSeconds: number }> {
  const { rows } = await db.query(
    `INSERT INTO chat_rate_limits AS l (key_id, window_start, requests) VALUES ($1, now(), 1)
     ON CONFLICT (key_id) DO UPDATE SET
       window_start = CASE WHEN l.window_start <= now() - interval '1 minute'
                           THEN now() ELSE l.window_start END,
       requests = CASE WHEN l.window_start <= now() - interval '1 minute'
                       THEN 1 ELSE l.requests + 1 END
     RETURNING requests,
       ceil(extract(epoch FROM l.window_start + interval '1 minute' - now()))::integer AS retry_after`,
    [keyId],
  );
  const row = parseStored(counted, rows[0], "a chat_rate_limits row");
  return { requests: row.requests, retryAfterSeconds: Math.max(1, row.retry_after) };
}
