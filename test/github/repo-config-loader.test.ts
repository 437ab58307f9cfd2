import nock from "nock";
import { describe, expect, it } from "vitest";
import { loadRepoConfig, renderConfigError } from "../../src/github/repo-config-loader.ts";
import { GITHUB_API, useGitHubMock } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";

const path = "/repos/acme/app/contents/.github%2Fvmpilot.yml";
const orgPath = "/repos/acme/.github/contents/.github%2Fvmpilot.yml";
const raw = (text: string) =>
  [200, text, { "content-type": "application/vnd.github.raw; charset=utf-8" }] as const;

useGitHubMock();

describe("loadRepoConfig", () => {
  it("reads the repository's file as raw text and validates it", async () => {
    nock(GITHUB_API, { reqheaders: { accept: /application\/vnd\.github\.v3\.raw/ } })
      .get(path)
      .reply(
        ...raw(
          "model: claude-haiku-4-5\nmaxSteps: 12\nsetup: [npm ci]\nnetwork:\n  allow: [registry.npmjs.org]\n",
        ),
      );
    const load = await loadRepoConfig(testOctokit(), { owner: "acme", repo: "app" });
    expect(load).toEqual({
      ok: true,
      config: {
        model: "claude-haiku-4-5",
        maxSteps: 12,
        setup: ["npm ci"],
        network: { allow: ["registry.npmjs.org"] },
      },
      source: "acme/app/.github/vmpilot.yml",
    });
  });

  it("takes the file whatever content type GitHub labels it with", async () => {
    nock(GITHUB_API)
      .get(path)
      .reply(200, "maxSteps: 3\n", { "content-type": "application/vnd.github.raw" });
    expect(await loadRepoConfig(testOctokit(), { owner: "acme", repo: "app" })).toMatchObject({
      ok: true,
      config: { maxSteps: 3 },
    });
  });

  it("falls back to the owner's .github repository, then to defaults", async () => {
    nock(GITHUB_API)
      .get(path)
      .reply(404)
      .get(orgPath)
      .reply(...raw("maxCostUsd: 2\n"));
    expect(await loadRepoConfig(testOctokit(), { owner: "acme", repo: "app" })).toMatchObject({
      ok: true,
      config: { maxCostUsd: 2 },
      source: "acme/.github/.github/vmpilot.yml",
    });
    nock(GITHUB_API).get(path).reply(404).get(orgPath).reply(404);
    expect(await loadRepoConfig(testOctokit(), { owner: "acme", repo: "app" })).toEqual({
      ok: true,
      config: {},
      source: undefined,
    });
  });

  it("names the bad key of an invalid file, and the comment says how to go on", async () => {
    nock(GITHUB_API)
      .get(path)
      .reply(...raw("maxSteps: 9000\nmodle: x\n"));
    const load = await loadRepoConfig(testOctokit(), { owner: "acme", repo: "app" });
    expect(load.ok).toBe(false);
    if (load.ok) return;
    expect(load.issues.map((i) => i.path).sort()).toEqual(["maxSteps", "modle"]);
    const body = renderConfigError(load, {
      jobId: 3,
      jobUrl: "https://v.example/jobs/3",
      command: "vmpilot",
    });
    expect(body).toContain("`acme/app/.github/vmpilot.yml` is invalid");
    expect(body).toContain("- `maxSteps`: must be at most 500");
    expect(body).toContain("- `modle`: unknown key");
    expect(body).toContain("`/vmpilot retry`");
  });

  it("keeps a key with backticks and an @mention inside its code span", async () => {
    nock(GITHUB_API)
      .get(path)
      .reply(...raw('"x` @someone `y": 1\n'));
    const load = await loadRepoConfig(testOctokit(), { owner: "acme", repo: "app" });
    expect(load.ok).toBe(false);
    if (load.ok) return;
    const body = renderConfigError(load, {
      jobId: 3,
      jobUrl: "https://v.example/jobs/3",
      command: "vmpilot",
    });
    // A two-backtick fence: the single backticks in the key cannot close it.
    expect(body).toContain("- ``x` @someone `y``: unknown key");
    expect(body).not.toMatch(/(?<!`)`x` @someone/);
  });

  it("reports broken YAML", async () => {
    nock(GITHUB_API)
      .get(path)
      .reply(...raw("setup: [npm ci\n"));
    const load = await loadRepoConfig(testOctokit(), { owner: "acme", repo: "app" });
    expect(load).toMatchObject({ ok: false, message: expect.stringMatching(/invalid YAML/) });
  });

  it("does not swallow server errors (they are retried, then fail the attempt)", async () => {
    nock(GITHUB_API).get(path).times(4).reply(500, { message: "boom" });
    await expect(
      loadRepoConfig(testOctokit(), { owner: "acme", repo: "app" }),
    ).rejects.toMatchObject({
      status: 500,
    });
  });
});
