import { ProbotOctokit } from "probot";
import { retrySecondaryRateLimits } from "../../src/github/rate-limit.ts";
import { GITHUB_API } from "./github-mock.ts";
import { noSecondaryWait } from "./secondary-wait.ts";

export const TEST_INSTALLATION_TOKEN = `ghs_${"T0k3n".repeat(7)}x`;

const silent = { debug() {}, info() {}, warn() {}, error() {} };

// As main.ts makes the app's clients.
const AppOctokit = ProbotOctokit.plugin(retrySecondaryRateLimits);

/**
 * An installation client built like the app's (ProbotOctokit: retry and throttling plugins, and
 * secondary rate limits retried in place), with retry delays of a millisecond, no wait on a
 * secondary rate limit and throttling off, so tests do not wait.
 */
export function testOctokit(baseUrl = GITHUB_API): ProbotOctokit {
  return new AppOctokit({
    auth: { token: TEST_INSTALLATION_TOKEN },
    baseUrl,
    retry: { retryAfterBaseValue: 1 },
    throttle: { enabled: false },
    secondaryRateLimit: noSecondaryWait,
    log: silent,
  });
}
