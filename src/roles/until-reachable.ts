import { setTimeout as sleep } from "node:timers/promises";
import { RequestError } from "@octokit/request-error";
import type { Logger } from "pino";
import type { Readiness } from "./readiness.ts";

export interface Backoff {
  firstDelayMs?: number;
  maxDelayMs?: number;
}

interface Options extends Backoff {
  readiness: Readiness;
  logger: Logger;
  /** Where close() steps go: closing the server stops the retries. */
  cleanup: Array<() => unknown>;
}

/** GitHub's answer to a bad app id or key: retrying would only hide it. */
function isRefusal(error: unknown): boolean {
  return (
    error instanceof RequestError &&
    error.status >= 400 &&
    error.status < 500 &&
    error.status !== 429
  );
}

/**
 * Calls GitHub until it answers, doubling the wait between attempts, then marks "github" ready:
 * containers often start before DNS or the network does.
 */
export async function untilReachable<T>(call: () => Promise<T>, options: Options): Promise<T> {
  const { readiness, logger, firstDelayMs = 1000, maxDelayMs = 30_000 } = options;
  const stop = new AbortController();
  options.cleanup.push(() => stop.abort());
  for (let delay = firstDelayMs; ; delay = Math.min(delay * 2, maxDelayMs)) {
    try {
      const result = await call();
      readiness.ready("github");
      return result;
    } catch (error) {
      if (isRefusal(error)) throw error;
      logger.warn(
        `GitHub is not reachable (${(error as Error).message}); trying again in ${delay} ms`,
      );
      await sleep(delay, undefined, { signal: stop.signal });
    }
  }
}
