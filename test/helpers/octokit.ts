import { ProbotOctokit } from "probot";
import { GITHUB_API } from "./github-mock.ts";

export const TEST_INSTALLATION_TOKEN = `ghs_${"T0k3n".repeat(7)}x`;

const silent = { debug() {}, info() {}, warn() {}, error() {} };

/**
 * An installation client built like the app's (ProbotOctokit: retry and throttling plugins), with
 * retry delays of a millisecond and throttling off so tests do not wait.
 */
export function testOctokit(baseUrl = GITHUB_API): ProbotOctokit {
  return new ProbotOctokit({
    auth: { token: TEST_INSTALLATION_TOKEN },
    baseUrl,
    retry: { retryAfterBaseValue: 1 },
    throttle: { enabled: false },
    log: silent,
  });
}
