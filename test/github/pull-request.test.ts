import nock from "nock";
import { describe, expect, it } from "vitest";
import { publishPullRequest, renderPullRequestBody } from "../../src/github/pull-request.ts";
import { GITHUB_API, useGitHubMock } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";

const input = {
  owner: "acme",
  repo: "app",
  head: "vmpilot/issue-4-fix-crash",
  base: "main",
  title: "Fix the crash",
  body: "body text\n\nFixes #4",
};
const prJson = (number: number, state = "open") => ({
  number,
  state,
  html_url: `https://github.com/acme/app/pull/${number}`,
  head: { ref: input.head },
});

useGitHubMock();

describe("publishPullRequest", () => {
  it("opens a draft when none exists, retrying a 502", async () => {
    let posts = 0;
    nock(GITHUB_API)
      .get("/repos/acme/app/pulls")
      .query({ head: `acme:${input.head}`, state: "open", per_page: "10" })
      .reply(200, [])
      .post("/repos/acme/app/pulls")
      .reply(() => {
        posts++;
        return [502, { message: "Bad Gateway" }];
      })
      .post("/repos/acme/app/pulls", (body) => {
        expect(body).toMatchObject({
          head: input.head,
          base: "main",
          draft: true,
          title: "Fix the crash",
        });
        return true;
      })
      .reply(201, prJson(12));
    const pr = await publishPullRequest(testOctokit(), input);
    expect(posts).toBe(1);
    expect(pr).toEqual({ number: 12, url: "https://github.com/acme/app/pull/12", created: true });
  });

  it("updates the conversation's open pull request instead of opening another", async () => {
    nock(GITHUB_API)
      .get("/repos/acme/app/pulls/12")
      .reply(200, prJson(12))
      .patch("/repos/acme/app/pulls/12", { body: input.body })
      .reply(200, prJson(12));
    const pr = await publishPullRequest(testOctokit(), { ...input, knownNumber: 12 });
    expect(pr).toMatchObject({ number: 12, created: false });
  });

  it("finds the open pull request by its head branch when the conversation lost track of it", async () => {
    nock(GITHUB_API)
      .get("/repos/acme/app/pulls/12")
      .reply(200, prJson(12, "closed"))
      .get("/repos/acme/app/pulls")
      .query(true)
      .reply(200, [prJson(15)])
      .patch("/repos/acme/app/pulls/15")
      .reply(200, prJson(15));
    const pr = await publishPullRequest(testOctokit(), { ...input, knownNumber: 12 });
    expect(pr).toMatchObject({ number: 15, created: false });
  });

  it("when a retried creation already succeeded, uses that pull request", async () => {
    nock(GITHUB_API)
      .get("/repos/acme/app/pulls")
      .query(true)
      .reply(200, [])
      .post("/repos/acme/app/pulls")
      .reply(422, {
        message: "Validation Failed",
        errors: [{ message: `A pull request already exists for acme:${input.head}.` }],
      })
      .get("/repos/acme/app/pulls")
      .query(true)
      .reply(200, [prJson(20)])
      .patch("/repos/acme/app/pulls/20")
      .reply(200, prJson(20));
    expect(await publishPullRequest(testOctokit(), input)).toMatchObject({ number: 20 });
  });

  it("opens a normal pull request where drafts are not available", async () => {
    nock(GITHUB_API)
      .get("/repos/acme/app/pulls")
      .query(true)
      .reply(200, [])
      .post("/repos/acme/app/pulls", (body) => body.draft === true)
      .reply(422, { message: "Draft pull requests are not supported in this repository." })
      .post("/repos/acme/app/pulls", (body) => body.draft === false)
      .reply(201, prJson(3));
    expect(await publishPullRequest(testOctokit(), input)).toMatchObject({
      number: 3,
      created: true,
    });
  });
});

describe("renderPullRequestBody", () => {
  const cost = {
    model: "openai/gpt-5.1",
    steps: 9,
    inputTokens: 4000,
    outputTokens: 2100,
    cacheReadInputTokens: 36_000,
    cacheCreationInputTokens: 0,
    costUsd: 0.4321,
  };

  it("has the summary, tests, files, the run's cost line and Fixes #N, redacted", () => {
    const body = renderPullRequestBody({
      summary: `Fixed it; the token was ghs_${"a".repeat(36)}. Thanks @someone`,
      tests: { outcome: "passed", command: "npm test" },
      files: [
        { status: "M", path: "src/a.ts" },
        { status: "A", path: "test/a.test.ts" },
      ],
      cost,
      durationMs: 95_000,
      fixes: 4,
      requester: "octocat",
      jobUrl: "https://vmpilot.example.com/jobs/9",
    });
    expect(body).toMatchInlineSnapshot(`
      "Fixed it; the token was [REDACTED]. Thanks @​someone

      ---

      **Tests:** ✔ passed (\`npm test\`)

      **Files changed (2):**
      - \`M\` src/a.ts
      - \`A\` test/a.test.ts

      **Run:** \`openai/gpt-5.1\` · 9 steps · 40,000 tokens in (90% cached), 2,100 out · $0.4321 · 1m 35s

      Asked by @octocat · [job log](https://vmpilot.example.com/jobs/9)

      Draft opened by vmpilot. Review it like any other pull request before merging.

      Fixes #4"
    `);
  });

  it("names no one for the operator's key: a mention would reach a user called operator; showCost off drops the line", () => {
    const body = renderPullRequestBody({
      summary: "Done",
      tests: undefined,
      files: [],
      cost: null,
      durationMs: 1000,
      requester: null,
      jobUrl: "https://vmpilot.example.com/jobs/10",
    });
    expect(body).toMatchInlineSnapshot(`
      "Done

      ---

      **Tests:** not reported

      **Files changed (0):**

      Asked with the operator's key · [job log](https://vmpilot.example.com/jobs/10)

      Draft opened by vmpilot. Review it like any other pull request before merging."
    `);
    expect(body).not.toContain("@");
  });
});
