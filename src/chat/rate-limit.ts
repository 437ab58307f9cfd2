// Requests per key per minute, counted in this web process (several web processes each allow it).
import { ApiError } from "./errors.ts";

export class RateLimiter {
  readonly #windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Counts a request, or throws a 429 saying when to come back. */
  take(key: string): void {
    const now = this.now();
    let window = this.#windows.get(key);
    if (!window || now - window.start >= 60_000) {
      if (this.#windows.size > 10_000) this.#windows.clear();
      window = { start: now, count: 0 };
      this.#windows.set(key, window);
    }
    window.count++;
    if (window.count <= this.perMinute) return;
    const retryAfter = Math.max(1, Math.ceil((window.start + 60_000 - now) / 1000));
    throw new ApiError(
      429,
      "rate_limit_exceeded",
      "rate_limit_exceeded",
      `Rate limit reached: ${this.perMinute} requests per minute for this key. Try again in ${retryAfter} s.`,
      { "retry-after": String(retryAfter) },
    );
  }
}
