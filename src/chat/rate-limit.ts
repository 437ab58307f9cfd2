// Requests per person per minute, counted in the store: every web process shares one count. A
// person's keys share it, so revoking a key and making another does not start a new minute.
import { countRequest } from "../store/chat-rate-limits.ts";
import type { Queryable } from "../store/sql.ts";
import type { Principal } from "./auth.ts";
import { ApiError } from "./errors.ts";

/** Counts a request, or throws a 429 saying when to come back. */
export async function takeRequest(db: Queryable, who: Principal, perMinute: number): Promise<void> {
  const counted = who.kind === "operator" ? "operator" : `user:${who.id}`;
  const { requests, retryAfterSeconds } = await countRequest(db, counted);
  if (requests <= perMinute) return;
  const whose = who.kind === "operator" ? "the operator's key" : "your keys together";
  throw new ApiError(
    429,
    "rate_limit_exceeded",
    "rate_limit_exceeded",
    `Rate limit reached: ${perMinute} requests per minute for ${whose}. Try again in ${retryAfterSeconds} s.`,
    { "retry-after": String(retryAfterSeconds) },
  );
}
