// The "vmpilot config" check run: real push and pull_request payloads POSTed to the real server,
// which records the check; its worker reads the file at the head and creates the check run, with
// GitHub mocked at the nock edge.
import { describe, expect, it, vi } from "vitest";
import { setRepositorySettings, upsertRepository } from "../../src/store/installations.ts";
import { github, mockInstallationToken, useGitHubMock } from "../helpers/github-mock.ts";
import { useTestServer } from "../helpers/test-server.ts";
import { examplePayload, type Payload } from "../helpers/webhooks.ts";

useGitHubMock();

const REPO = "Codertocat/Hello-World";
const REPO_ID = 186853002;
const CONFIG_PATH = "/repos/Codertocat/Hello-World/contents/.github%2Fvmpilot.yml";
const t = useTestServer();
let nextInstallation = 3000;

function withInstallation(payload: Payload): Payload {
  payload.installation = { id: nextInstallation++ };
  return payload;
}

function pullRequest(action: "opened" | "synchronize", headSha: string): Payload {
  const payload = withInstallation(examplePayload("pull_request", action));
  payload.pull_request.head.sha = headSha;
  return payload;
}

/** A push of one commit to a branch (GitHub's example, a deleted tag, made a branch push). */
function push(headSha: string, files: string[]): Payload {
  const payload = withInstallation(examplePayload("push"));
  const commit = { id: headSha, message: "change", added: [], removed: [], modified: files };
  return {
    ...payload,
    ref: "refs/heads/settings",
    after: headSha,
    deleted: false,
    created: false,
    commits: [commit],
    head_commit: commit,
  };
}

function mockFile(headSha: string, text: string) {
  github()
    .get(CONFIG_PATH)
    .query({ ref: headSha })
    .reply(200, text, { "content-type": "application/vnd.github.raw" });
}

function mockSkill(headSha: string, path: string, text: string) {
  github()
    .get(`/repos/${REPO}/contents/${encodeURIComponent(path)}`)
    .query({ ref: headSha })
    .reply(200, text, { "content-type": "application/vnd.github.raw" });
}

function mockPullFiles(number: number, filenames: string[]) {
  github()
    .get(`/repos/${REPO}/pulls/${number}/files`)
    .query({ per_page: 100 })
    .reply(
      200,
      filenames.map((filename) => ({ filename, status: "modified" })),
    );
}

/** Captures the check run request's body. */
function mockCheckRun(): () => Payload {
  let body: Payload;
  github()
    .post(`/repos/${REPO}/check-runs`, (sent) => {
      body = sent;
      return true;
    })
    .reply(201, { id: 1 });
  return () => body;
}

/** The config checks queued for a head: their pg-boss states, once none is still to run. */
async function settledChecks(headSha: string): Promise<string[]> {
  return vi.waitFor(
    async () => {
      const { rows } = await t.db.pool.query<{ state: string }>(
        "SELECT state FROM pgboss.job WHERE name = 'vmpilot-config-checks' AND data->>'headSha' = $1",
        [headSha],
      );
      const states = rows.map((row) => row.state);
      if (states.some((state) => state !== "completed" && state !== "failed")) {
        throw new Error(`checks still to run: ${states.join(", ")}`);
      }
      return states;
    },
    { timeout: 15_000, interval: 25 },
  );
}

describe("the vmpilot config check run", () => {
  it("fails a pull request whose file has bad keys, with an annotation at each key's line", async () => {
    const sha = "a1".repeat(20);
    const payload = pullRequest("opened", sha);
    mockInstallationToken(payload.installation.id);
    mockPullFiles(payload.pull_request.number, ["README.md", ".github/vmpilot.yml"]);
    mockFile(
      sha,
      [
        "# vmpilot settings",
        "label: ai-fix",
        "modle: claude-haiku-4-5",
        "network:",
        "  allow:",
        "    - registry.npmjs.org",
        "    - 127.0.0.1:5432",
        "",
      ].join("\n"),
    );
    const checkRun = mockCheckRun();
    expect((await t.send("pull_request", payload)).status).toBe(200);
    expect(await settledChecks(sha)).toEqual(["completed"]);
    expect(checkRun()).toMatchInlineSnapshot(`
      {
        "conclusion": "failure",
        "head_sha": "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
        "name": "vmpilot config",
        "output": {
          "annotations": [
            {
              "annotation_level": "failure",
              "end_line": 3,
              "message": "modle: unknown key",
              "path": ".github/vmpilot.yml",
              "start_line": 3,
            },
            {
              "annotation_level": "failure",
              "end_line": 7,
              "message": "network.allow[1]: must not be an internal address (loopback): the sandbox may not reach the worker's own machine or network",
              "path": ".github/vmpilot.yml",
              "start_line": 7,
            },
          ],
          "summary": "vmpilot refuses to start a job with this \`.github/vmpilot.yml\` until it is fixed:

      - line 3: \`modle\`: unknown key
      - line 7: \`network.allow[1]\`: must not be an internal address (loopback): the sandbox may not reach the worker's own machine or network",
          "title": "2 errors in .github/vmpilot.yml",
        },
        "status": "completed",
      }
    `);
  });

  it("passes a valid file pushed to any branch, showing what the file sets and nothing of the settings page", async () => {
    const sha = "b2".repeat(20);
    const payload = push(sha, [".github/vmpilot.yml"]);
    await upsertRepository(t.db.pool, {
      id: REPO_ID,
      installationId: payload.installation.id,
      fullName: REPO,
    });
    // Admin-only: check runs are public, so none of it may show.
    await setRepositorySettings(t.db.pool, REPO_ID, {
      maxSteps: 20,
      allowedUsers: ["trusted-friend"],
      network: { allow: ["internal.example.com"] },
      maxMonthlyCostUsdPerUser: 7,
    });
    mockInstallationToken(payload.installation.id);
    mockFile(
      sha,
      "label: ai-fix\nmaxCostUsd: 2.5\nsetup: [npm ci]\nautomations:\n  - {name: weekly, schedule: '0 6 * * 1', prompt: x}\n",
    );
    const checkRun = mockCheckRun();
    expect((await t.send("push", payload)).status).toBe(200);
    expect(await settledChecks(sha)).toEqual(["completed"]);
    expect(checkRun()).toMatchInlineSnapshot(`
      {
        "conclusion": "success",
        "head_sha": "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2",
        "name": "vmpilot config",
        "output": {
          "summary": "\`.github/vmpilot.yml\` is valid. It sets:

      - \`label\`: \`"ai-fix"\`
      - \`maxCostUsd\`: \`2.5\`
      - \`setup\`: \`["npm ci"]\`
      - \`automations\`: \`["weekly"]\`

      What it does not set comes from the repository's settings page and vmpilot's defaults.",
          "title": ".github/vmpilot.yml is valid",
        },
        "status": "completed",
      }
    `);
  });

  it("points a YAML syntax error at its line, on a fork's pull request too", async () => {
    const sha = "c3".repeat(20);
    const payload = pullRequest("synchronize", sha);
    payload.pull_request.head.repo = {
      ...payload.pull_request.head.repo,
      full_name: "someone/Hello-World",
      fork: true,
    };
    mockInstallationToken(payload.installation.id);
    mockPullFiles(payload.pull_request.number, [".github/vmpilot.yml"]);
    mockFile(sha, "label: ai-fix\nsetup: [npm ci\nmaxSteps: 3\n");
    const checkRun = mockCheckRun();
    expect((await t.send("pull_request", payload)).status).toBe(200);
    expect(await settledChecks(sha)).toEqual(["completed"]);
    expect(checkRun()).toMatchObject({
      conclusion: "failure",
      output: {
        annotations: [
          {
            path: ".github/vmpilot.yml",
            start_line: 3,
            end_line: 3,
            annotation_level: "failure",
            message: expect.stringMatching(/^invalid YAML: /),
          },
        ],
      },
    });
  });

  it("points a skill's malformed front matter at its line, on a push and a pull request", async () => {
    const skill = ".claude/skills/release/SKILL.md";
    const good = ".github/vmpilot/skills/deploy/SKILL.md";
    const sha = "a7".repeat(20);
    const pushed = push(sha, [skill, good, "README.md"]);
    mockInstallationToken(pushed.installation.id);
    // No vmpilot.yml at the head: only the skills to check.
    github().get(CONFIG_PATH).query({ ref: sha }).reply(404);
    mockSkill(sha, skill, "---\nname: Release Notes\ndescription: Cut a release.\n---\nbody\n");
    mockSkill(sha, good, "---\nname: deploy\ndescription: Deploy the docs.\n---\n");
    const checkRun = mockCheckRun();
    expect((await t.send("push", pushed)).status).toBe(200);
    expect(await settledChecks(sha)).toEqual(["completed"]);
    expect(checkRun()).toMatchInlineSnapshot(`
      {
        "conclusion": "failure",
        "head_sha": "a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7a7",
        "name": "vmpilot config",
        "output": {
          "annotations": [
            {
              "annotation_level": "failure",
              "end_line": 2,
              "message": "name: must be lowercase letters, digits and single hyphens",
              "path": ".claude/skills/release/SKILL.md",
              "start_line": 2,
            },
          ],
          "summary": "vmpilot leaves a skill out of its jobs until its front matter is fixed:

      - \`.claude/skills/release/SKILL.md\` line 2: \`name\`: must be lowercase letters, digits and single hyphens",
          "title": "1 error in .claude/skills/release/SKILL.md",
        },
        "status": "completed",
      }
    `);

    const opened = "b8".repeat(20);
    const payload = pullRequest("opened", opened);
    mockInstallationToken(payload.installation.id);
    mockPullFiles(payload.pull_request.number, [good]);
    github().get(CONFIG_PATH).query({ ref: opened }).reply(404);
    mockSkill(opened, good, "---\nname: deploy\ndescription: Deploy the docs.\n---\n");
    const passed = mockCheckRun();
    expect((await t.send("pull_request", payload)).status).toBe(200);
    expect(await settledChecks(opened)).toEqual(["completed"]);
    expect(passed()).toMatchObject({
      conclusion: "success",
      output: { summary: expect.stringContaining("These skills' front matter is valid") },
    });
  });

  it("creates nothing for a push or a pull request that does not change the file", async () => {
    const pushed = "d4".repeat(20);
    expect((await t.send("push", push(pushed, ["README.md"]))).status).toBe(200);
    expect(await settledChecks(pushed)).toEqual([]);
    const sha = "e5".repeat(20);
    const payload = pullRequest("opened", sha);
    mockInstallationToken(payload.installation.id);
    mockPullFiles(payload.pull_request.number, ["README.md"]);
    expect((await t.send("pull_request", payload)).status).toBe(200);
    expect(await settledChecks(sha)).toEqual(["completed"]);
  });

  it("checks a head once, whether a push or its pull request names it, however often", async () => {
    const sha = "f6".repeat(20);
    const pushed = push(sha, [".github/vmpilot.yml"]);
    mockInstallationToken(pushed.installation.id);
    mockFile(sha, "label: ai-fix\n");
    const checkRun = mockCheckRun();
    expect((await t.send("push", pushed)).status).toBe(200);
    const opened = pullRequest("opened", sha);
    expect((await t.send("pull_request", opened)).status).toBe(200);
    expect((await t.send("pull_request", opened)).status).toBe(200);
    expect(await settledChecks(sha)).toEqual(["completed"]);
    expect(checkRun()).toMatchObject({ head_sha: sha, conclusion: "success" });
    const { rows } = await t.db.pool.query(
      "SELECT 1 FROM config_checks WHERE repository_id = $1 AND head_sha = $2",
      [REPO_ID, sha],
    );
    expect(rows).toHaveLength(1);
  });
});
