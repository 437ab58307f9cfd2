// The pipeline end to end in-process: PGlite, the real sandbox and git, a loopback git server as
// the remote, the Anthropic fake at the HTTP edge and GitHub's REST API mocked with nock.

import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import type { JobDeps } from "../../src/jobs/run/deps.ts";
import { modelTokens, workspaceErrors } from "../../src/metrics.ts";
import { getConversation } from "../../src/store/conversations.ts";
import { listJobEvents } from "../../src/store/job-events.ts";
import { getJob } from "../../src/store/jobs.ts";
import { listMessages } from "../../src/store/messages.ts";
import { DEFAULT_LIMITS } from "../../src/workspace/sandbox/limits.ts";
import { type FakeReply, overloaded, text, toolUse } from "../helpers/anthropic-fake.ts";
import type { EngineFake } from "../helpers/engine-fake.ts";
import { FLY_APP, startFlyFake } from "../helpers/fly-fake.ts";
import { github } from "../helpers/github-mock.ts";
import { NAMESPACE, startKubernetesFake } from "../helpers/kubernetes-fake.ts";
import { secondaryRateLimitWaits } from "../helpers/secondary-wait.ts";
import {
  API_KEY,
  captureComment,
  fixScript,
  lastTurn,
  mockRequester,
  mockStart,
  pinnedText,
  plain,
  run,
  runQueued,
  sh,
  TOKEN,
  toolResults,
  usePipelineHarness,
} from "./pipeline-harness.ts";

const h = usePipelineHarness();
const WEBHOOK_SECRET = "webhook-secret-for-the-pipeline-test";
const secretForms = [
  TOKEN,
  Buffer.from(`x-access-token:${TOKEN}`).toString("base64"),
  API_KEY,
  WEBHOOK_SECRET,
];
const branch = "vmpilot/issue-4-crash-on-empty-input";

describe("an issue job", () => {
  it("fixes an issue: branch pushed, draft PR with Fixes #N, final comment links it; a follow-up continues the conversation and the PR", async () => {
    const seeded = await h.seedRepo();
    const first = await h.seedJob(seeded);
    mockStart(seeded);
    mockRequester();
    const comment = captureComment(seeded.repo, first.commentId);
    let prBody = "";
    github()
      .get(`/repos/${seeded.repo}/pulls`)
      .query({ head: `acme:${branch}`, state: "open", per_page: "10" })
      .reply(200, [])
      .post(`/repos/${seeded.repo}/pulls`, (body) => {
        prBody = body.body;
        expect(body).toMatchObject({
          head: branch,
          base: "main",
          draft: true,
          title: "Make value.txt say fixed",
        });
        return true;
      })
      .reply(201, { number: 12, html_url: `https://github.com/${seeded.repo}/pull/12` });
    h.fake.push(...fixScript("Changed value.txt to fixed.\n\nSummary: Make value.txt say fixed"));
    const outputTokens = async () =>
      (await modelTokens.get()).values.find((v) => v.labels.kind === "output")?.value ?? 0;
    const tokensBefore = await outputTokens();

    expect(await runQueued(run(first.job.id), h.deps())).toBe("succeeded");
    // The fake model reports output tokens on every reply; /metrics counts them.
    expect(await outputTokens()).toBeGreaterThan(tokensBefore);

    expect(sh(seeded.remote, `git show ${branch}:value.txt`)).toBe("fixed");
    expect(sh(seeded.remote, `git log -1 --format='%an|%B' ${branch}`)).toBe(
      "vmpilot-bot[bot]|Make value.txt say fixed\n\nCo-authored-by: octocat <583231+octocat@users.noreply.github.com>",
    );
    const pinned = (text: string, jobId: number) =>
      pinnedText(text, jobId).replaceAll(seeded.repo, "REPO");
    expect(pinned(prBody, first.job.id)).toMatchInlineSnapshot(`
      "Changed value.txt to fixed.

      Summary: Make value.txt say fixed

      ---

      **Tests:** ✔ passed (\`sh test.sh\`)

      **Second look:** Nothing found.

      **Files changed (1):**
      - \`M\` value.txt

      **Run:** \`claude-sonnet-5-5\` · 5 steps · TOKENS · COST · TIME

      Asked by @octocat · [job log](https://vmpilot.test/jobs/N)

      Draft opened by vmpilot. Review it like any other pull request before merging.

      Fixes #4"
    `);
    expect(pinned(comment.at(-1) ?? "", first.job.id)).toMatchInlineSnapshot(`
      "✅ **Opened draft pull request #12** — [job #N](https://vmpilot.test/jobs/N)

      Pull request: [#12](https://github.com/REPO/pull/12)

      Changed value.txt to fixed.

      Summary: Make value.txt say fixed

      - Tests: ✔ passed (\`sh test.sh\`)
      - Run: \`claude-sonnet-5-5\` · 5 steps · TOKENS · COST · TIME

      <!-- vmpilot:job:N -->"
    `);
    // The untrusted issue text reached the model sanitized and fenced.
    const opening = JSON.stringify(h.fake.requests[0]?.body.messages[0]);
    expect(opening).toContain("<github_context>");
    expect(opening).not.toContain("ignore your instructions");

    const job1 = await getJob(h.db.pool, first.job.id);
    expect(job1).toMatchObject({ status: "succeeded", prNumber: 12, branch });
    expect(job1?.costUsd).toBeGreaterThan(0);
    expect(await getConversation(h.db.pool, seeded.conversationId)).toMatchObject({
      prNumber: 12,
      branch,
    });
    const stored = await listMessages(h.db.pool, seeded.conversationId);
    // The run's 8 messages, then its second look's request and answer.
    expect(stored).toHaveLength(10);
    const events = await listJobEvents(h.db.pool, first.job.id);
    expect(events.map((e) => e.type)).toEqual(
      expect.arrayContaining(["pipeline", "tool_call", "tool_result", "usage", "finished"]),
    );

    // The follow-up: a mention in the same conversation.
    const second = await h.seedJob(seeded, {
      trigger: "mention",
      instruction: "also write done.txt",
      triggerCommentId: 901,
    });
    // The repository turns the cost line off: neither the comment nor the pull request shows it.
    mockStart(
      seeded,
      [
        {
          id: 901,
          user: { login: "octocat" },
          body: "@vmpilot-bot also write done.txt",
          created_at: "2030-01-01T00:00:00Z",
        },
      ],
      "showCost: false\n",
    );
    mockRequester();
    const comment2 = captureComment(seeded.repo, second.commentId);
    github()
      .get(`/repos/${seeded.repo}/pulls/12`)
      .reply(200, {
        number: 12,
        state: "open",
        html_url: `https://github.com/${seeded.repo}/pull/12`,
      })
      .patch(`/repos/${seeded.repo}/pulls/12`, (body) => {
        prBody = body.body;
        return true;
      })
      .reply(200, { number: 12 });
    const [firstStep, ...rest] = fixScript(
      "Wrote done.txt.\n\nSummary: Add done.txt",
      "echo yes > done.txt",
    );
    h.fake.push(
      (request) => {
        const messages = request.body.messages;
        // The whole first run comes first, then the new request.
        expect(messages.slice(0, 10).map(plain)).toEqual(stored.map(plain));
        expect(lastTurn(request.body)).toContain("also write done.txt");
        return firstStep as FakeReply;
      },
      ...rest,
    );

    expect(await runQueued(run(second.job.id), h.deps())).toBe("succeeded");
    expect(sh(seeded.remote, `git log --format=%s main..${branch}`)).toBe(
      "Add done.txt\nMake value.txt say fixed",
    );
    expect(sh(seeded.remote, `git show ${branch}:done.txt`)).toBe("yes");
    expect(pinned(prBody, second.job.id)).toMatchInlineSnapshot(`
      "Wrote done.txt.

      Summary: Add done.txt

      ---

      **Tests:** ✔ passed (\`sh test.sh\`)

      **Second look:** Nothing found.

      **Files changed (2):**
      - \`A\` done.txt
      - \`M\` value.txt

      Asked by @octocat · [job log](https://vmpilot.test/jobs/N)

      Draft opened by vmpilot. Review it like any other pull request before merging.

      Fixes #4"
    `);
    expect(pinned(comment2.at(-1) ?? "", second.job.id)).toMatchInlineSnapshot(`
      "✅ **Updated pull request #12** — [job #N](https://vmpilot.test/jobs/N)

      Pull request: [#12](https://github.com/REPO/pull/12)

      Wrote done.txt.

      Summary: Add done.txt

      - Tests: ✔ passed (\`sh test.sh\`)

      <!-- vmpilot:job:N -->"
    `);
    expect(await listMessages(h.db.pool, seeded.conversationId)).toHaveLength(20);
  });

  it("goes on past a secondary rate limit where it happens: no new attempt, the wait GitHub asked for", async () => {
    const seeded = await h.seedRepo();
    const job = await h.seedJob(seeded);
    mockStart(seeded);
    mockRequester();
    // The first edit of the progress comment meets a secondary rate limit.
    github()
      .patch(`/repos/${seeded.repo}/issues/comments/${job.commentId}`)
      .reply(403, { message: "You have exceeded a secondary rate limit." }, { "retry-after": "1" });
    const comment = captureComment(seeded.repo, job.commentId);
    github()
      .get(`/repos/${seeded.repo}/pulls`)
      .query(true)
      .reply(200, [])
      .post(`/repos/${seeded.repo}/pulls`)
      .reply(201, { number: 14, html_url: `https://github.com/${seeded.repo}/pull/14` });
    h.fake.push(...fixScript("Changed value.txt to fixed.\n\nSummary: Make value.txt say fixed"));
    const waits = secondaryRateLimitWaits.length;

    expect(await runQueued(run(job.job.id), h.deps())).toBe("succeeded");
    expect(secondaryRateLimitWaits.slice(waits)).toEqual([1000]);
    expect(comment.at(-1)).toContain("✅ **Opened draft pull request #14**");
  });

  /** One issue → pull request job with these deps (and this vmpilot.yml), expected to succeed. */
  async function expectPullRequest(deps: Partial<JobDeps>, yml?: string) {
    const seeded = await h.seedRepo();
    const job = await h.seedJob(seeded);
    mockStart(seeded, [], yml);
    mockRequester();
    const comment = captureComment(seeded.repo, job.commentId);
    github()
      .get(`/repos/${seeded.repo}/pulls`)
      .query(true)
      .reply(200, [])
      .post(`/repos/${seeded.repo}/pulls`)
      .reply(201, { number: 14, html_url: `https://github.com/${seeded.repo}/pull/14` });
    h.fake.push(...fixScript("Changed value.txt to fixed.\n\nSummary: Make value.txt say fixed"));
    expect(await runQueued(run(job.job.id), h.deps(deps))).toBe("succeeded");
    expect(sh(seeded.remote, `git show ${branch}:value.txt`)).toBe("fixed");
    expect(comment.at(-1)).toContain("✅ **Opened draft pull request #14**");
    expect(comment.at(-1)).toContain("- Tests: ✔ passed");
  }

  const FLY_VM = { workspace: { isolation: "vm", engine: "fly" } } as const;
  const flyEnv = (fake: EngineFake) => ({
    FLY_API_TOKEN: fake.token,
    FLY_WORKSPACE_APP: FLY_APP,
    FLY_WORKSPACE_IMAGE: fake.image,
    FLY_API_URL: fake.url,
  });
  const kubernetesEnv = (fake: EngineFake) => ({
    KUBERNETES_NAMESPACE: NAMESPACE,
    KUBERNETES_WORKSPACE_IMAGE: fake.image,
  });

  it.each([
    ["WORKSPACE_ISOLATION=vm WORKSPACE_ENGINE=fly", startFlyFake, flyEnv, FLY_VM, undefined],
    [
      "WORKSPACE_ISOLATION=vm WORKSPACE_ENGINE=kubernetes",
      startKubernetesFake,
      kubernetesEnv,
      { workspace: { isolation: "vm", engine: "kubernetes" } },
      undefined,
    ],
    [
      "isolation: vm in vmpilot.yml, WORKSPACE_ENGINE=fly",
      startFlyFake,
      flyEnv,
      { workspace: { isolation: "sandbox", engine: "fly" } },
      "isolation: vm\n",
    ],
  ] as const)(
    "runs the issue → pull request flow on a VM: %s",
    async (_name, start, env, deps, yml) => {
      const fake = await start();
      await usingEngine(fake, env(fake), async () => {
        await expectPullRequest(deps, yml);
        // The job ran on one VM, which is gone.
        expect(fake.calls.filter((call) => call.startsWith("POST"))).toHaveLength(1);
        expect(fake.vms.running()).toBe(0);
        expect(fake.problems).toEqual([]);
      });
    },
  );

  /** Runs `body` with the engine settings of `fake` in the environment, then closes the fake. */
  async function usingEngine(
    fake: EngineFake,
    env: Record<string, string>,
    body: () => Promise<void>,
  ) {
    const dir = await mkdtemp(join(tmpdir(), "vmpilot-kubeconfig-"));
    const kubeconfig = join(dir, "config");
    await writeFile(kubeconfig, "kubeconfig" in fake ? String(fake.kubeconfig) : "");
    for (const [name, value] of Object.entries({
      ...env,
      WORKSPACE_AGENT_PORT: String(fake.vms.port),
      KUBECONFIG: kubeconfig,
    })) {
      vi.stubEnv(name, value);
    }
    try {
      await body();
    } finally {
      vi.unstubAllEnvs();
      await fake.close();
      await rm(dir, { recursive: true, force: true });
    }
  }

  const workspaceErrorCount = async (kind: string) =>
    (await workspaceErrors.get()).values.find((v) => v.labels.kind === kind)?.value ?? 0;

  it("fails at once, in one clear line, when the engine refuses the VM; /metrics counts it by kind", async () => {
    const fake = await startFlyFake();
    await usingEngine(
      fake,
      { ...flyEnv(fake), FLY_WORKSPACE_IMAGE: "no/such-image:1" },
      async () => {
        const refused = await workspaceErrorCount("vm_refused");
        const seeded = await h.seedRepo();
        const { job, commentId } = await h.seedJob(seeded);
        mockStart(seeded);
        const comment = captureComment(seeded.repo, commentId);
        expect(await runQueued(run(job.id), h.deps(FLY_VM))).toBe("failed");
        expect(comment.at(-1)).toContain("failed to resolve image no/such-image:1");
        expect(await workspaceErrorCount("vm_refused")).toBe(refused + 1);
        expect(fake.vms.running()).toBe(0);
        expect(h.fake.requests).toHaveLength(0);
      },
    );
  });

  it("fails at once, saying why, when a repository asks for a VM and there is none", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded);
    mockStart(seeded, [], "isolation: vm\n");
    const comment = captureComment(seeded.repo, commentId);
    expect(await runQueued(run(job.id), h.deps())).toBe("failed");
    expect(comment.at(-1)).toContain("asks for `isolation: vm`");
    expect(comment.at(-1)).toContain("WORKSPACE_ENGINE");
    expect(h.fake.requests).toHaveLength(0);
  });

  it("a hostile agent finds no token, key or webhook secret anywhere it can look", async () => {
    const saved = { ...process.env };
    process.env.ANTHROPIC_API_KEY = API_KEY;
    process.env.WEBHOOK_SECRET = WEBHOOK_SECRET;
    process.env.GITHUB_TOKEN = TOKEN;
    try {
      const seeded = await h.seedRepo();
      const { job, commentId } = await h.seedJob(seeded);
      mockStart(seeded);
      mockRequester();
      const comment = captureComment(seeded.repo, commentId);
      const probes = [
        "env",
        "cat /proc/*/environ | tr '\\0' '\\n'",
        "git config --list --show-origin",
        "cat .git/config",
        "ls -la ~ && cat ~/.gitconfig ~/.git-credentials 2>&1",
        `cat ${h.dataDir}/mirrors/*/config 2>&1; ls -R ${h.dataDir} 2>&1 | head`,
        "ps aux 2>&1 || ls /proc",
        'echo "user=$(id -un) procs=$(ulimit -u)"',
      ];
      h.fake.push(
        { content: probes.map((command) => toolUse("bash", { command })) },
        { content: [toolUse("report_tests", { outcome: "not_run", explanation: "probing only" })] },
        { content: [text("Nothing to change.")] },
      );

      const limits = { ...DEFAULT_LIMITS, processes: 777 };
      expect(await runQueued(run(job.id), h.deps({ sandboxLimits: limits }))).toBe("succeeded");

      const results = h.fake.requests.flatMap((r) => toolResults(r.body));
      expect(results.length).toBeGreaterThanOrEqual(probes.length);
      expect(results.join("\n")).toContain("HOME=/home/sandbox");
      // The operator's limits reach the job's sandbox, which runs as its own unprivileged user.
      expect(results.join("\n")).toContain("user=sandbox procs=777");
      for (const request of h.fake.requests) {
        const body = JSON.stringify(request.body);
        for (const secret of secretForms) expect(body).not.toContain(secret);
      }
      expect(comment.at(-1)).toContain("**Answered, without changing the code**");
    } finally {
      process.env = saved;
    }
  });

  it("answers a question on a repository whose tests fail: the answer in the comment, no test report asked for, no pull request", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded, {
      trigger: "command",
      instruction: "look around the repository and tell me what you find",
    });
    mockStart(seeded);
    mockRequester();
    const comment = captureComment(seeded.repo, commentId);
    h.fake.push(
      { content: [toolUse("bash", { command: "ls && cat value.txt && sh test.sh" })] },
      {
        content: [
          text("Two files: value.txt says `broken`, and test.sh fails until it says `fixed`."),
        ],
      },
    );

    expect(await runQueued(run(job.id), h.deps())).toBe("succeeded");

    expect(h.fake.requests).toHaveLength(2);
    expect(toolResults(h.fake.requests[1]?.body).join()).toContain("broken");
    expect(sh(seeded.remote, "git for-each-ref --format='%(refname)' refs/heads")).toBe(
      "refs/heads/main",
    );
    const final = pinnedText(comment.at(-1) ?? "", job.id);
    expect(final).not.toContain("failed");
    expect(final).toMatchInlineSnapshot(`
      "✅ **Answered, without changing the code** — [job #N](https://vmpilot.test/jobs/N)

      Two files: value.txt says \`broken\`, and test.sh fails until it says \`fixed\`.

      - Tests: not run (no changes)
      - Run: \`claude-sonnet-5-5\` · 2 steps · TOKENS · COST · TIME

      <!-- vmpilot:job:N -->"
    `);
  });

  it("tells the user when Anthropic stays overloaded after the retries", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded);
    mockStart(seeded);
    const comment = captureComment(seeded.repo, commentId);
    h.fake.push(overloaded(), overloaded(), overloaded());

    expect(await runQueued(run(job.id), h.deps())).toBe("failed");

    expect(h.fake.requests).toHaveLength(3);
    const final = comment.at(-1) ?? "";
    expect(final).toContain("❌ **vmpilot failed**");
    expect(final).toMatch(/overloaded/i);
    expect(final).toContain("Comment `/vmpilot retry` to try again.");
    expect(await getJob(h.db.pool, job.id)).toMatchObject({ status: "failed" });
  });

  it("stops the agent at the repository's timeoutMinutes and says so", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded);
    github()
      .get(`/repos/${seeded.repo}/contents/.github%2Fvmpilot.yml`)
      .reply(200, "timeoutMinutes: 1\n", { "content-type": "application/vnd.github.raw" })
      .get(`/repos/${seeded.repo}/issues/${seeded.number}`)
      .reply(200, { number: seeded.number, title: "Slow", body: "", user: { login: "a" } })
      .get(`/repos/${seeded.repo}/issues/${seeded.number}/comments`)
      .query(true)
      .reply(200, []);
    mockRequester();
    const comment = captureComment(seeded.repo, commentId);
    h.fake.push(() => {
      // The run's clock jumps two minutes while the model "thinks".
      vi.setSystemTime(Date.now() + 2 * 60_000);
      return { content: [toolUse("bash", { command: "true" })] };
    });

    try {
      expect(await runQueued(run(job.id), h.deps())).toBe("succeeded");
    } finally {
      vi.useRealTimers();
    }
    const final = comment.at(-1) ?? "";
    expect(final).toContain("⚠️ **Done: no changes to the code, so no pull request**");
    expect(final).toMatch(/> Stopped after 1\d\d s \(limit 60 s\)\./);
  });

  it("names the bad key of an invalid .github/vmpilot.yml and does nothing else", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded);
    github()
      .get(`/repos/${seeded.repo}/contents/.github%2Fvmpilot.yml`)
      .reply(200, "maxSteps: 9000\nsetup: [npm ci]\n", {
        "content-type": "application/vnd.github.raw",
      });
    const comment = captureComment(seeded.repo, commentId);

    expect(await runQueued(run(job.id), h.deps())).toBe("failed");

    expect(comment.at(-1)).toContain("- `maxSteps`: must be at most 500");
    expect(h.fake.requests).toHaveLength(0);
    expect((await getJob(h.db.pool, job.id))?.error).toMatch(/maxSteps/);
  });
});
