// The pipeline's steps on their own: what is asked of the agent, on which branch, what is
// logged, what a review becomes, and how the conversation is repaired after a crash.
import nock from "nock";
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import { describeToolCall } from "../../src/agent/tool-call.ts";
import type { IssueContext } from "../../src/github/issue-context.ts";
import { formatDuration, ThrottledComment } from "../../src/github/progress-comment.ts";
import {
  instructionFor,
  resolveRequest,
  type WorkRequest,
} from "../../src/jobs/kinds/issue/request.ts";
import { commentableLines, parseReview } from "../../src/jobs/kinds/issue/review.ts";
import { chooseTarget } from "../../src/jobs/kinds/issue/target.ts";
import { loadConversation } from "../../src/jobs/run/history.ts";
import { JobProgress } from "../../src/jobs/run/progress.ts";
import { grant, readFile } from "../../src/jobs/run/settings.ts";
import { saveCompaction } from "../../src/store/compactions.ts";
import { type Conversation, findOrCreateConversation } from "../../src/store/conversations.ts";
import type { Database } from "../../src/store/database.ts";
import { setRepositorySettings, upsertRepository } from "../../src/store/installations.ts";
import { listJobEvents } from "../../src/store/job-events.ts";
import {
  getJob,
  type IssueJob,
  insertJob,
  type Job,
  type NewJob,
  updateJob,
} from "../../src/store/jobs.ts";
import { appendMessage, listMessages } from "../../src/store/messages.ts";
import { InvalidStoredValue } from "../../src/store/stored-value.ts";
import { openTestDatabase } from "../helpers/db.ts";
import { GITHUB_API, useGitHubMock } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";

useGitHubMock();

let db: Database;
let nextRepo = 9000;

beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(() => db?.close());

async function conversationWithJobs(
  jobs: Partial<NewJob>[],
): Promise<{ conversation: Conversation; jobs: Job[] }> {
  const repositoryId = nextRepo++;
  await upsertRepository(db.pool, {
    id: repositoryId,
    installationId: 1,
    fullName: `o/r${repositoryId}`,
  });
  const conversation = await findOrCreateConversation(db.pool, {
    repositoryId,
    number: 3,
    kind: "issue",
  });
  const inserted: Job[] = [];
  for (const job of jobs) {
    inserted.push(
      await insertJob(db.pool, {
        conversationId: conversation.id,
        installationId: 1,
        repositoryId,
        repo: `o/r${repositoryId}`,
        number: 3,
        trigger: "command",
        command: "fix",
        requester: "dev",
        ...job,
      }),
    );
  }
  return { conversation, jobs: inserted };
}

const issue: IssueContext = {
  kind: "issue",
  number: 3,
  title: "Bug",
  body: "It breaks.",
  author: "reporter",
  comments: [],
};

describe("resolveRequest", () => {
  it("retry repeats the conversation's last piece of work, skipping control commands", async () => {
    const { jobs } = await conversationWithJobs([
      { command: "plan", instruction: "think first" },
      { command: "status" },
      { command: "retry" },
    ]);
    const request = await resolveRequest(db.pool, jobs[2] as Job);
    expect(request).toMatchObject({ mode: "plan", request: "think first" });
    expect("source" in request && request.source.id).toBe(jobs[0]?.id);
  });

  it.each([
    ["approve", true],
    ["LGTM!", true],
    ["", true],
    ["approve, but also rename the function", false],
  ])("%j after a plan approves it: %s", async (instruction, approves) => {
    const { jobs } = await conversationWithJobs([
      { command: "plan" },
      { trigger: "mention", instruction },
    ]);
    const request = (await resolveRequest(db.pool, jobs[1] as Job)) as WorkRequest;
    expect(request.mode).toBe("fix");
    expect(request.approvesPlan).toBe(approves);
  });

  it("reviews and review comments become threads jobs; /review is a review", async () => {
    const { jobs } = await conversationWithJobs([
      { trigger: "review", instruction: "" },
      { trigger: "review_comment", instruction: "and this" },
      { command: "review" },
    ]);
    const modes = [];
    for (const job of jobs) modes.push(((await resolveRequest(db.pool, job)) as WorkRequest).mode);
    expect(modes).toEqual(["threads", "threads", "review"]);
  });
});

describe("instructionFor", () => {
  const base = {
    requester: "dev",
    number: 3,
    kind: "issue" as const,
    context: issue,
    itemSeen: false,
  };
  const request = (mode: WorkRequest["mode"], text = "", approvesPlan = false) =>
    ({ mode, request: text, approvesPlan }) as WorkRequest;

  it("plan and review ask for no edits; the context stays fenced", () => {
    const plan = instructionFor({ ...base, request: request("plan", "how?"), retry: false });
    expect(plan).toMatch(
      /^@dev asks for a plan only, for issue #3 \(this is your instruction\)\.\n\n> how\?/,
    );
    expect(plan).toContain("Do not change any files");
    expect(plan).toContain("<github_context>\nIssue #3: Bug");
    const review = instructionFor({
      ...base,
      kind: "pull_request",
      request: request("review"),
      retry: true,
    });
    expect(review).toMatch(/^@dev asked to retry\. @dev asks you to review pull request #3/);
  });

  it("an approval points at the plan above, without the old context again", () => {
    const text = instructionFor({
      ...base,
      itemSeen: true,
      request: request("fix", "", true),
      retry: false,
    });
    expect(text).toBe("@dev approved the plan you proposed above: carry it out now, with tests.");
  });
});

describe("chooseTarget", () => {
  const conversation = (over: Partial<Conversation> = {}): Conversation => ({
    id: 1,
    repositoryId: 1,
    number: 3,
    kind: "issue",
    prNumber: null,
    branch: null,
    messageCount: 0,
    createdAt: new Date(),
    updatedAt: new Date(),
    ...over,
  });
  const job = { id: 44, number: 3 } as IssueJob;
  const pr = (over: Partial<NonNullable<IssueContext["pullRequest"]>> = {}) => ({
    ...issue,
    kind: "pull_request" as const,
    pullRequest: {
      headRef: "feature/x",
      headSha: "s",
      baseRef: "main",
      headRepo: "o/r",
      fromFork: false,
      diff: "",
      diffCut: false,
      reviewComments: [],
      ...over,
    },
  });
  const input = { job, title: "Bug", defaultBranch: "main" };

  it("an issue's conversation keeps its branch; a new one is named from the title", () => {
    expect(
      chooseTarget({
        ...input,
        conversation: conversation({ branch: "vmpilot/issue-3-old" }),
        mode: "fix",
        pushes: true,
        issue,
      }),
    ).toEqual({
      ok: true,
      branch: "vmpilot/issue-3-old",
      served: false,
      prNumber: null,
    });
    expect(
      chooseTarget({ ...input, conversation: conversation(), mode: "fix", pushes: true, issue }),
    ).toMatchObject({
      branch: "vmpilot/issue-3-bug",
    });
  });

  it("review needs a pull request", () => {
    expect(
      chooseTarget({
        ...input,
        conversation: conversation(),
        mode: "review",
        pushes: false,
        issue,
      }),
    ).toMatchObject({
      ok: false,
    });
  });

  it("someone's pull request is served on its own branch, but not from a fork (a fix there suggests) or the default branch", () => {
    const prConversation = conversation({ kind: "pull_request", prNumber: 3 });
    expect(
      chooseTarget({
        ...input,
        conversation: prConversation,
        mode: "fix",
        pushes: true,
        issue: pr(),
      }),
    ).toEqual({
      ok: true,
      branch: "feature/x",
      served: true,
      prNumber: 3,
    });
    expect(
      chooseTarget({
        ...input,
        conversation: prConversation,
        mode: "fix",
        pushes: true,
        issue: pr({ fromFork: true, headRepo: "x/r" }),
      }),
    ).toEqual({ ok: true, branch: "vmpilot/job-44", served: false, prNumber: 3, suggests: true });
    expect(
      chooseTarget({
        ...input,
        conversation: prConversation,
        mode: "threads",
        pushes: true,
        issue: pr({ fromFork: true, headRepo: "x/r" }),
      }),
    ).toMatchObject({ ok: false, headline: "Cannot push to a fork" });
    expect(
      chooseTarget({
        ...input,
        conversation: prConversation,
        mode: "review",
        pushes: false,
        issue: pr({ fromFork: true }),
      }),
    ).toMatchObject({ ok: true, branch: "vmpilot/job-44", served: false });
    expect(
      chooseTarget({
        ...input,
        conversation: prConversation,
        mode: "fix",
        pushes: true,
        issue: pr({ headRef: "main" }),
      }),
    ).toMatchObject({ ok: false });
    expect(
      chooseTarget({
        ...input,
        conversation: prConversation,
        mode: "fix",
        pushes: true,
        issue: pr({ headRef: "a b" }),
      }),
    ).toMatchObject({ ok: false });
  });
});

describe("loadConversation", () => {
  it("answers tool calls a crashed worker left open, and stores the answer", async () => {
    const { conversation, jobs } = await conversationWithJobs([{}]);
    const jobId = (jobs[0] as Job).id;
    await appendMessage(db.pool, {
      conversationId: conversation.id,
      role: "user",
      content: "fix it",
      jobId,
    });
    await appendMessage(db.pool, {
      conversationId: conversation.id,
      role: "assistant",
      content: [{ type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } }],
      jobId,
    });
    const loaded = await loadConversation(db.pool, conversation.id, jobId);
    expect(loaded.fromThisJob).toBe(3);
    expect(loaded.messages.at(-1)).toEqual({
      role: "user",
      content: [
        {
          type: "tool_result",
          tool_use_id: "toolu_1",
          content: expect.stringContaining("the worker stopped"),
          is_error: true,
        },
      ],
    });
    expect(await listMessages(db.pool, conversation.id)).toHaveLength(3);
    // Loading again changes nothing.
    expect((await loadConversation(db.pool, conversation.id, jobId)).messages).toHaveLength(3);
  });
});

describe("stored conversation read back", () => {
  it("a message row that is not a model message fails with an error naming the row", async () => {
    const { conversation, jobs } = await conversationWithJobs([{}]);
    const jobId = (jobs[0] as Job).id;
    await appendMessage(db.pool, {
      conversationId: conversation.id,
      role: "user",
      content: "fix it",
      jobId,
    });
    await appendMessage(db.pool, {
      conversationId: conversation.id,
      role: "assistant",
      content: [{ type: "tool_use", name: "bash" }],
      jobId,
    });
    const loading = loadConversation(db.pool, conversation.id, jobId);
    await expect(loading).rejects.toThrow(InvalidStoredValue);
    await expect(loading).rejects.toThrow(
      `messages row 2 of conversation ${conversation.id} is not valid`,
    );
    expect(await listMessages(db.pool, conversation.id)).toHaveLength(2);
  });

  it("a compaction that is not a list of model messages fails with an error naming it", async () => {
    const { conversation, jobs } = await conversationWithJobs([{}]);
    const jobId = (jobs[0] as Job).id;
    await appendMessage(db.pool, {
      conversationId: conversation.id,
      role: "user",
      content: "one",
      jobId,
    });
    await db.pool.query(
      "INSERT INTO conversation_compactions (conversation_id, covered_messages, messages) VALUES ($1, 1, $2)",
      [conversation.id, JSON.stringify([{ stale: true }])],
    );
    await expect(loadConversation(db.pool, conversation.id, jobId)).rejects.toThrow(
      `the conversation_compactions row of conversation ${conversation.id} is not valid`,
    );
  });
});

describe("conversation compactions", () => {
  it("keep the newest, and one that stands for more than is stored is not used", async () => {
    const { conversation, jobs } = await conversationWithJobs([{}]);
    const jobId = (jobs[0] as Job).id;
    for (const content of ["one", "two", "three"]) {
      await appendMessage(db.pool, {
        conversationId: conversation.id,
        role: "user",
        content,
        jobId,
      });
    }
    const summary = { role: "user" as const, content: "summary of one and two" };
    await saveCompaction(db.pool, conversation.id, { coveredMessages: 2, messages: [summary] });
    await saveCompaction(db.pool, conversation.id, {
      coveredMessages: 1,
      messages: [{ role: "user", content: "stale" }],
    });
    const loaded = await loadConversation(db.pool, conversation.id, jobId);
    expect(loaded.messages.map((m) => m.content)).toEqual(["summary of one and two", "three"]);
    expect(loaded.storedCount).toBe(3);

    await saveCompaction(db.pool, conversation.id, { coveredMessages: 9, messages: [summary] });
    expect((await loadConversation(db.pool, conversation.id, jobId)).messages).toHaveLength(3);
  });
});

describe("JobProgress", () => {
  it("logs agent events redacted, keeps the job's cost current, and shows the latest activity", async () => {
    const { jobs } = await conversationWithJobs([{}]);
    const job = jobs[0] as Job;
    const bodies: string[] = [];
    const comment = new ThrottledComment({
      edit: async (body) => void bodies.push(body),
      intervalMs: 0,
    });
    const progress = new JobProgress({
      db: db.pool,
      jobId: job.id,
      comment,
      view: { jobId: job.id, jobUrl: "u", current: "agent", startedAt: Date.now(), costUsd: 0.5 },
      baseCostUsd: 0.5,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
    });
    const token = `ghs_${"x".repeat(36)}`;
    const totals = {
      inputTokens: 10,
      outputTokens: 5,
      cacheCreationInputTokens: 0,
      cacheReadInputTokens: 0,
      costUsd: 0.25,
    };
    progress.onEvent({
      type: "tool_call",
      step: 1,
      id: "t",
      name: "bash",
      input: { command: `echo ${token}\nmore` },
    });
    progress.onEvent({
      type: "tool_result",
      step: 1,
      id: "t",
      name: "bash",
      isError: false,
      output: token,
      log: `${token}${"y".repeat(300_000)}`,
      durationMs: 3,
    });
    progress.onEvent({ type: "usage", step: 1, request: totals, totals, priceKnown: true });
    await progress.flush();

    const events = await listJobEvents(db.pool, job.id);
    expect(events.map((e) => e.type)).toEqual(["tool_call", "tool_result", "usage"]);
    expect(JSON.stringify(events)).not.toContain(token);
    expect(String(events[1]?.data.log).length).toBeLessThan(201_000);
    expect((await getJob(db.pool, job.id))?.costUsd).toBeCloseTo(0.75);
    expect(bodies[0]).toContain("Latest: `$ echo [REDACTED]`");
  });

  it("refreshes the elapsed time while no events arrive, until stopped", () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    onTestFinished(() => {
      vi.useRealTimers();
    });
    let now = 1_000_000;
    const bodies: string[] = [];
    const comment = { update: (body: string) => bodies.push(body) };
    const progress = new JobProgress({
      db: db.pool,
      jobId: 1,
      comment: comment as unknown as ThrottledComment,
      view: { jobId: 1, jobUrl: "u", current: "agent", startedAt: now, costUsd: 0 },
      baseCostUsd: 0,
      logger: { debug() {}, info() {}, warn() {}, error() {} },
      now: () => now,
    });
    now += 30_000;
    vi.advanceTimersByTime(30_000);
    expect(bodies).toHaveLength(1);
    expect(bodies[0]).toContain(`Elapsed ${formatDuration(30_000)}`);
    progress.stop();
    now += 60_000;
    vi.advanceTimersByTime(60_000);
    expect(bodies).toHaveLength(1);
  });

  it("describes tool calls in one line", () => {
    expect(describeToolCall("bash", { command: "npm test\nnpm run lint" })).toBe("$ npm test");
    expect(
      describeToolCall("str_replace_based_edit_tool", { command: "view", path: "src/a.ts" }),
    ).toBe("view src/a.ts");
    expect(describeToolCall("report_tests", {})).toBe("report_tests");
    expect(describeToolCall("mcp__my-docs__fetch__page", { url: "x" })).toBe(
      "MCP my-docs: fetch__page",
    );
    // The model's input, whatever its shape: one the tool would refuse shows the tool's name.
    expect(describeToolCall("bash", { command: 42 })).toBe("bash");
    expect(describeToolCall("str_replace_based_edit_tool", "view")).toBe(
      "str_replace_based_edit_tool",
    );
  });
});

describe("grant", () => {
  const read = (job: IssueJob, repo: string) =>
    readFile(db.pool, testOctokit(), { id: job.repositoryId, owner: "o", name: repo });
  const scope = (job: IssueJob) => ({ repositoryId: job.repositoryId });

  it("merges page settings under the file and stops at the daily cap", async () => {
    const { jobs } = await conversationWithJobs([{}, {}]);
    const [spent, job] = jobs as [IssueJob, IssueJob];
    const repo = `r${job.repositoryId}`;
    await setRepositorySettings(db.pool, job.repositoryId, { maxDailyCostUsd: 10, maxSteps: 7 });
    await updateJob(db.pool, spent.id, { costUsd: 9 });
    nock(GITHUB_API)
      .get(`/repos/o/${repo}/contents/.github%2Fvmpilot.yml`)
      .reply(200, "maxCostUsd: 3\n", { "content-type": "text/plain; charset=utf-8" });
    const ok = await grant({ db }, job, scope(job), read(job, repo), "requester");
    expect(ok).toMatchObject({ settings: { maxSteps: 7, maxCostUsd: 3 }, budgetUsd: 1 });

    await updateJob(db.pool, spent.id, { costUsd: 10 });
    nock(GITHUB_API)
      .get(`/repos/o/${repo}/contents/.github%2Fvmpilot.yml`)
      .reply(404)
      .get("/repos/o/.github/contents/.github%2Fvmpilot.yml")
      .reply(404);
    const capped = await grant({ db }, job, scope(job), read(job, repo), "requester");
    expect(capped).toEqual({ limit: expect.stringContaining("daily cost limit ($10.00)") });
  });

  it("keeps the page's cost limits as ceilings the file may lower but not raise", async () => {
    const { jobs } = await conversationWithJobs([{}, {}]);
    const [spent, job] = jobs as [IssueJob, IssueJob];
    const repo = `r${job.repositoryId}`;
    await setRepositorySettings(db.pool, job.repositoryId, {
      maxDailyCostUsd: 10,
      maxMonthlyCostUsdPerUser: 20,
    });
    await updateJob(db.pool, spent.id, { costUsd: 10 });
    nock(GITHUB_API)
      .get(`/repos/o/${repo}/contents/.github%2Fvmpilot.yml`)
      .reply(200, "maxDailyCostUsd: 1000\nmaxMonthlyCostUsdPerUser: 1000\n", {
        "content-type": "text/plain; charset=utf-8",
      });
    const raised = await grant({ db }, job, scope(job), read(job, repo), "requester");
    expect(raised).toEqual({ limit: expect.stringContaining("daily cost limit ($10.00)") });

    await updateJob(db.pool, spent.id, { costUsd: 1 });
    nock(GITHUB_API)
      .get(`/repos/o/${repo}/contents/.github%2Fvmpilot.yml`)
      .reply(200, "maxDailyCostUsd: 3\nmaxMonthlyCostUsdPerUser: 1000\n", {
        "content-type": "text/plain; charset=utf-8",
      });
    const lowered = await grant({ db }, job, scope(job), read(job, repo), "requester");
    expect(lowered).toMatchObject({
      settings: { maxDailyCostUsd: 3, maxMonthlyCostUsdPerUser: 20 },
      budgetUsd: 2,
    });
  });
});

describe("review parsing", () => {
  it("splits a review into its summary and anchored comments", () => {
    const review = parseReview(
      "Verdict: request changes.\n\n- `src/a.ts:12` — **blocker**: null deref.\n  Guard it.\n\n`src/b.ts:3-9` **nit**: name\n\nOverall fine otherwise.",
    );
    expect(review.summary).toBe("Verdict: request changes.\n\n\n\nOverall fine otherwise.");
    expect(review.comments).toEqual([
      { path: "src/a.ts", line: 12, body: "**blocker**: null deref.\n  Guard it." },
      { path: "src/b.ts", line: 3, body: "**nit**: name" },
    ]);
  });

  it("knows which new-file lines a diff shows", () => {
    const lines = commentableLines([
      { filename: "a.ts", patch: "@@ -10,3 +10,4 @@\n ctx\n-old\n+new\n+added\n ctx2" },
      { filename: "bin.png" },
    ]);
    expect([...(lines.get("a.ts") ?? [])]).toEqual([10, 11, 12, 13]);
    expect(lines.get("bin.png")?.size).toBe(0);
  });
});
