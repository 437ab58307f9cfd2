// Requests per key per minute, counted in the store: every web process shares one count.
import { countRequest } from "../store/chat-rate-limits.ts";
import type { Queryable } from "../store/sql.ts";
import { ApiError } from "./errors.ts";

/** Counts a request, or throws a 429 saying when to come back. */
export async function takeRequest(db: Queryable, keyId: string, perMinute: number): Promise<void> {
  const { requests, retryAfterSeconds } = await countRequest(db, keyId);
  if (requests <= perMinute) return;
  throw new ApiError(
    429,
    "rate_limit_exceeded",
    "rate_limit_exceeded",
    `Rate limit reached: ${perMinute} requests per minute for this key. Try again in ${retryAfterSeconds} s.`,
    { "retry-after": String(retryAfterSeconds) },
  );
}
