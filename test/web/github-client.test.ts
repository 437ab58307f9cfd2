// The web layer's GitHub client and OAuth exchange on Octokit, against loopback servers that
// answer as GitHub does.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { GitHubAnswerError } from "../../src/github/answer.ts";
import { GitHubAuthError, GitHubUserApi } from "../../src/web/github-user.ts";
import { exchangeCode, SignInRefused } from "../../src/web/oauth.ts";
import { startGitHubFake } from "./helpers/github-fake.ts";

let server: Server | undefined;

afterEach(() => new Promise<void>((done) => (server ? server.close(() => done()) : done())));

/** A GitHub API that answers /user with each of `replies` in turn. */
async function userApi(
  replies: Array<[number, unknown]>,
): Promise<{ url: string; seen: string[] }> {
  const seen: string[] = [];
  server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? "-"}`);
    const [status, body] = replies.shift() ?? [500, { message: "no reply left" }];
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v3`, seen };
}

describe("GitHubUserApi", () => {
  it("asks with the user's token and parses the answer", async () => {
    const api = await userApi([[200, { login: "alice", id: 7, extra: "ignored" }]]);
    expect(await new GitHubUserApi(api.url, "ghu_alice").user()).toEqual({ login: "alice", id: 7 });
    expect(api.seen).toEqual(["GET /api/v3/user token ghu_alice"]);
  });

  it("says clearly when GitHub's answer is not as documented", async () => {
    const api = await userApi([[200, { id: 7 }]]);
    const user = new GitHubUserApi(api.url, "ghu_alice").user();
    await expect(user).rejects.toBeInstanceOf(GitHubAnswerError);
    await expect(user).rejects.toThrow("GitHub's answer to GET /user is not as documented");
  });

  it("ends the session when GitHub rejects the token", async () => {
    const api = await userApi([[401, { message: "Bad credentials" }]]);
    await expect(new GitHubUserApi(api.url, "ghu_old").user()).rejects.toBeInstanceOf(
      GitHubAuthError,
    );
  });

  it("retries a server error, as Octokit does", async () => {
    const api = await userApi([
      [502, { message: "Bad Gateway" }],
      [200, { login: "alice", id: 7 }],
    ]);
    expect(await new GitHubUserApi(api.url, "ghu_alice").user()).toEqual({ login: "alice", id: 7 });
    expect(api.seen).toHaveLength(2);
  });
});

describe("exchangeCode", () => {
  it("turns GitHub's refusal of a bad code into a clear error", async () => {
    const fake = await startGitHubFake();
    try {
      const app = { clientId: fake.clientId, clientSecret: fake.clientSecret };
      const exchange = exchangeCode(fake.apiUrl, app, "not-a-code", "http://app.test/cb");
      await expect(exchange).rejects.toBeInstanceOf(SignInRefused);
      await expect(exchange).rejects.toThrow(
        "GitHub refused the sign-in: The code passed is incorrect or expired.",
      );
    } finally {
      await fake.close();
    }
  });
});
