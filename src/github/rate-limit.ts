import { RequestError } from "@octokit/request-error";
import type { ProbotOctokit } from "probot";
import { githubRateLimit } from "../metrics.ts";

type Hooks = Pick<InstanceType<typeof ProbotOctokit>, "hook">;

/** Keeps the rate-limit gauge at what GitHub's latest response to this client said. */
export function watchRateLimit(octokit: Hooks, installation: string): void {
  const note = (headers: Record<string, unknown> | undefined) => {
    const remaining = Number(headers?.["x-ratelimit-remaining"] ?? Number.NaN);
    if (Number.isFinite(remaining)) githubRateLimit.set({ installation }, remaining);
  };
  octokit.hook.after("request", (response) => note(response.headers));
  octokit.hook.error("request", (error) => {
    if (error instanceof RequestError) note(error.response?.headers);
    throw error;
  });
}

// A secondary rate limit answers 403 (or 429) with how many seconds to wait; Probot's throttling
// only logs it, so the call failed and took its job's whole attempt with it. The call is made
// again where it is, a few times and for short waits; a longer wait is the job's retry's to take.
const SECONDARY_RETRIES = 3;
const SECONDARY_WAIT_SECONDS = 60;

export interface SecondaryRateLimitOptions {
  /** How to wait before trying again (tests pass one that does not sleep). */
  wait?: (ms: number) => Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * An Octokit plugin (the app's clients are made with it, main.ts): a call answered with a
 * secondary rate limit is made again after the `retry-after` GitHub asked for.
 */
export function retrySecondaryRateLimits(
  octokit: Hooks,
  options: { secondaryRateLimit?: SecondaryRateLimitOptions; [option: string]: unknown },
): void {
  const wait = options.secondaryRateLimit?.wait ?? sleep;
  octokit.hook.wrap("request", async (request, requestOptions) => {
    for (let retries = 0; ; retries++) {
      try {
        return await request(requestOptions);
      } catch (error) {
        const seconds = secondaryRetryAfter(error);
        if (seconds === undefined || retries >= SECONDARY_RETRIES) throw error;
        await wait(seconds * 1000);
      }
    }
  });
}

/** The seconds a secondary rate limit asks to wait, when it is one and the wait is short. */
function secondaryRetryAfter(error: unknown): number | undefined {
  if (!(error instanceof RequestError) || (error.status !== 403 && error.status !== 429)) {
    return undefined;
  }
  const seconds = Number(error.response?.headers["retry-after"] ?? Number.NaN);
  return seconds >= 0 && seconds <= SECONDARY_WAIT_SECONDS ? seconds : undefined;
}
