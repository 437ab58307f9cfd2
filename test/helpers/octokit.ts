import nock from "nock";
import { ProbotOctokit } from "probot";

export const GITHUB_API = "https://api.github.com";
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

/** nock on GitHub only; loopback stays reachable for the fakes. */
export function isolateNetwork(): void {
  nock.disableNetConnect();
  nock.enableNetConnect(/127\.0\.0\.1|localhost/);
}

/** Fails the test when a mock was not used, then clears them. */
export function assertAllMocksUsed(): void {
  const pending = nock.pendingMocks();
  nock.cleanAll();
  if (pending.length > 0) throw new Error(`unused GitHub mocks: ${pending.join(", ")}`);
}
