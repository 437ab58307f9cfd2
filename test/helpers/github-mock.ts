// GitHub's REST API at the nock edge. Every mock must be used and every request must be mocked:
// `useGitHubMock()` installs hooks that fail the test otherwise.
import nock from "nock";
import { afterAll, afterEach, beforeAll, expect } from "vitest";

export const GITHUB_API = "https://api.github.com";

let unexpected: string[] = [];
// The fakes, and the VM fakes' agents at their own 127.x addresses.
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\])$/;
// nock reports every unmatched request here, including allowed loopback traffic.
const onNoMatch = (req: { method: string; url: string }) => {
  if (!LOOPBACK.test(new URL(req.url).hostname)) unexpected.push(`${req.method} ${req.url}`);
};

/** Call at the top of a test file. */
export function useGitHubMock(): void {
  beforeAll(() => {
    nock.disableNetConnect();
    nock.enableNetConnect((host) => LOOPBACK.test(host.replace(/:\d+$/, "")));
    nock.emitter.on("no match", onNoMatch);
  });
  afterEach(() => {
    const pending = nock.pendingMocks();
    const stray = unexpected;
    unexpected = [];
    nock.cleanAll();
    expect(stray, "requests to GitHub that no mock answered").toEqual([]);
    expect(pending, "GitHub mocks that were never called").toEqual([]);
  });
  afterAll(() => {
    nock.emitter.removeListener("no match", onNoMatch);
    nock.enableNetConnect();
  });
}

/** Fails the current test on the spot when unused mocks or stray requests remain. */
export function expectGitHubDone(): void {
  expect(unexpected).toEqual([]);
  expect(nock.pendingMocks()).toEqual([]);
}

export function github(baseUrl = GITHUB_API): nock.Scope {
  return nock(baseUrl);
}

/** GET /app, which the web role calls once at startup for the app's slug. */
export function mockApp(slug: string, baseUrl = GITHUB_API): nock.Scope {
  return github(baseUrl)
    .get("/app")
    .reply(200, { id: 1, slug, name: slug, owner: { login: "acme" } });
}

/** An installation token, as the worker gets it before acting on an installation. */
export function mockInstallationToken(installationId: number, baseUrl = GITHUB_API): nock.Scope {
  // Kept for the whole test: the intake makes no client, so the worker's first requests may each
  // ask for the token before one of them has it cached, as they may against GitHub.
  return github(baseUrl)
    .post(`/app/installations/${installationId}/access_tokens`)
    .reply(201, {
      token: `ghs_${"x".repeat(36)}`,
      expires_at: new Date(Date.now() + 3_600_000).toISOString(),
      permissions: { issues: "write", contents: "write", pull_requests: "write" },
      repository_selection: "all",
    })
    .persist();
}

/** GET .../collaborators/:user/permission answering with a role. */
export function mockPermission(
  repo: string,
  username: string,
  role: "admin" | "maintain" | "write" | "triage" | "read" | "none",
  baseUrl = GITHUB_API,
): nock.Scope {
  const permission = role === "maintain" ? "write" : role === "triage" ? "read" : role;
  return github(baseUrl)
    .get(`/repos/${repo}/collaborators/${username}/permission`)
    .reply(200, { permission, role_name: role, user: { login: username } });
}

/**
 * GET of `.github/vmpilot.yml`: the repository's file (raw text), or none there nor in the owner's
 * `.github` repository when `text` is undefined.
 */
export function mockRepoConfig(repo: string, text?: string, baseUrl = GITHUB_API): nock.Scope {
  const scope = github(baseUrl).get(`/repos/${repo}/contents/.github%2Fvmpilot.yml`);
  if (text !== undefined) return scope.reply(200, text, { "content-type": "text/plain" });
  const owner = repo.split("/")[0];
  return scope
    .reply(404, { message: "Not Found" })
    .get(`/repos/${owner}/.github/contents/.github%2Fvmpilot.yml`)
    .reply(404, { message: "Not Found" });
}
