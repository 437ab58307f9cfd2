// Automations end to end in-process: an opened issue through the intake, the acknowledgement and
// the pipeline (triage), and a scheduled run on no issue. PGlite, the real sandbox and git, a
// loopback git server as the remote, the Anthropic fake, and GitHub's REST API mocked with nock.
import { describe, expect, it } from "vitest";
import { recordIssueAutomations } from "../../src/intake/automations.ts";
import { fromIssues } from "../../src/intake/deliveries.ts";
import { type ScheduledContext, syncAutomations } from "../../src/jobs/automations/schedules.ts";
import { KINDS } from "../../src/jobs/kinds/index.ts";
import type { OpenDeps, Run } from "../../src/jobs/run/deps.ts";
import { runJob } from "../../src/jobs/run/runner.ts";
import { createAutomationConversation } from "../../src/store/conversations.ts";
import { getRepository, setRepositoryFileSettings } from "../../src/store/installations.ts";
import { getJob, insertJob } from "../../src/store/jobs.ts";
import { jobSpender } from "../../src/store/spenders.ts";
import { text, toolUse } from "../helpers/anthropic-fake.ts";
import { github, mockPermission, mockRepoConfig } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";
import { examplePayload } from "../helpers/webhooks.ts";
import {
  captureComment,
  fixScript,
  run,
  runQueued,
  type Seeded,
  sh,
  usePipelineHarness,
} from "./pipeline-harness.ts";

const h = usePipelineHarness();
const logger = { debug() {}, info() {}, warn() {}, error() {} };

const TRIAGE_FILE = `
automations:
  - name: triage
    on: issues.opened
    mode: triage
    prompt: Label the issue from the repository's labels and thank its author.
`;

const ANY_TRIAGE_FILE = `
automations:
  - name: triage
    on: issues.opened
    mode: triage
    authors: any
    labels: [bug, question]
    prompt: Label it.
`;

/** The intake's view: the queue takes the jobs (they are run by hand here). */
function intakeDeps() {
  return {
    db: h.db,
    queue: { enqueueJobs: async () => {}, wake() {} },
    appSlug: "vmpilot-bot",
    label: "vmpilot",
    command: "vmpilot",
  };
}

/** A job through the runner as far as its first answer: a worker with no work to go on to. */
const acknowledge = async (deps: OpenDeps, at: Omit<Run, "maxAttempts">) => ({
  outcome: await runJob(KINDS, { ...at, maxAttempts: 3 }, deps, undefined),
});

const ackDeps = () => ({
  db: h.db,
  queue: { cancel: async () => "finished" as const },
  auth: async () => testOctokit(),
  allowedUsers: [],
  publicUrl: "https://vmpilot.test",
  logger,
});

let nextIssueId = 800_000;

/** GitHub's issues.opened example, on the seeded repository and issue, opened by `author`, read. */
function issueOpened(seeded: Seeded, author: string, authorId = 21031067) {
  const payload = examplePayload("issues", "opened");
  payload.installation = { id: 77 };
  payload.repository = {
    ...payload.repository,
    id: seeded.repositoryId,
    full_name: seeded.repo,
    name: seeded.name,
    owner: { ...payload.repository.owner, login: "acme" },
    clone_url: h.cloneUrl(seeded),
    default_branch: "main",
  };
  payload.issue = {
    ...payload.issue,
    id: nextIssueId++,
    number: seeded.number,
    title: "Crash on empty input",
    user: { ...payload.issue.user, login: author, id: authorId },
  };
  payload.sender = { ...payload.sender, login: author, id: authorId, type: "User" };
  return fromIssues(payload);
}

/** The issue and its comments, as the pipeline reads them. */
function mockIssue(seeded: Seeded, author: string) {
  github()
    .get(`/repos/${seeded.repo}/issues/${seeded.number}`)
    .reply(200, {
      number: seeded.number,
      title: "Crash on empty input",
      body: "It crashes when value.txt is empty.",
      user: { login: author },
    })
    .get(`/repos/${seeded.repo}/issues/${seeded.number}/comments`)
    .query(true)
    .reply(200, []);
}

describe("an automation on issues.opened", () => {
  it("triages a new issue: labels from the repository's list, one comment, nothing pushed", async () => {
    const seeded = await h.seedRepo();
    await setRepositoryFileSettings(h.db.pool, seeded.repositoryId, {
      automations: [
        {
          name: "triage",
          on: "issues.opened",
          mode: "triage",
          prompt: "Label the issue from the repository's labels and thank its author.",
        },
      ],
    });
    const payload = issueOpened(seeded, "reporter");
    const [jobId] = await recordIssueAutomations(intakeDeps(), "delivery-1", payload);
    // A redelivery of the same event makes no second run.
    expect(await recordIssueAutomations(intakeDeps(), "delivery-2", payload)).toEqual([]);
    expect(await getJob(h.db.pool, jobId as number)).toMatchObject({
      trigger: "automation",
      command: "triage",
      requester: "vmpilot-bot[bot]",
      number: seeded.number,
      context: { automation: { name: "triage", authors: "write", author: "reporter" } },
    });

    // The acknowledgement: the author may write, so the automation runs; no 👀, one comment.
    mockRepoConfig(seeded.repo, TRIAGE_FILE);
    mockPermission(seeded.repo, "reporter", "write");
    let posted = "";
    github()
      .post(`/repos/${seeded.repo}/issues/${seeded.number}/comments`, (body) => {
        posted = body.body;
        return true;
      })
      .reply(201, { id: 7001 });

    mockIssue(seeded, "reporter");
    github()
      .get(`/repos/${seeded.repo}/labels`)
      .query({ per_page: 100 })
      .reply(200, [{ name: "bug" }, { name: "question" }, { name: "needs info" }]);
    let labelled: unknown;
    github()
      .post(`/repos/${seeded.repo}/issues/${seeded.number}/labels`, (body) => {
        labelled = body;
        return true;
      })
      .reply(200, [{ name: "bug" }]);
    const comment = captureComment(seeded.repo, 7001);
    h.fake.push(
      { content: [text("Reading it."), toolUse("apply_labels", { labels: ["Bug", "wontfix"] })] },
      { content: [toolUse("apply_labels", { labels: ["Bug"] })] },
      { content: [text("Thanks @reporter! This is a bug: an empty value.txt is not handled.")] },
    );

    const outcome = await runQueued(run(jobId as number), { ...h.deps(), allowedUsers: [] });

    expect(outcome).toBe("succeeded");
    expect(posted).toContain("Acknowledged `triage` by this repository's automation");
    expect(labelled).toEqual({ labels: ["bug"] });
    expect(comment.at(-1)).toMatchInlineSnapshot(`
      "Thanks @​reporter! This is a bug: an empty value.txt is not handled.

      <sub>Triage by vmpilot's automation \`triage\` · labels: \`bug\` · [job #${jobId}](https://vmpilot.test/jobs/${jobId})</sub>

      <!-- vmpilot:job:${jobId} -->"
    `);
    // The model could read (bash) and label, nothing else; it saw the labels and the prompt.
    const first = h.fake.requests[0]?.body;
    expect(first.tools.map((tool: { name: string }) => tool.name)).toEqual([
      "bash",
      "apply_labels",
    ]);
    const opening = JSON.stringify(first.messages[0]);
    expect(opening).toContain("The repository's automation `triage` asks");
    expect(opening).toContain('- \\"needs info\\"');
    expect(JSON.stringify(h.fake.requests[1]?.body.messages.at(-1))).toContain(
      "Not labels you may apply: wontfix",
    );
    // Nothing pushed: no branch, and no pull request (nock would have refused one).
    expect(sh(seeded.remote, "git for-each-ref --format='%(refname)' refs/heads")).toBe(
      "refs/heads/main",
    );
    expect(await getJob(h.db.pool, jobId as number)).toMatchObject({
      status: "succeeded",
      branch: null,
      prNumber: null,
    });
  });

  it("ignores an issue whose author may not trigger vmpilot, unless it says authors: any", async () => {
    const seeded = await h.seedRepo({ number: 5 });
    const automation = { name: "triage", on: "issues.opened", mode: "triage", prompt: "Label it." };
    await setRepositoryFileSettings(h.db.pool, seeded.repositoryId, { automations: [automation] });
    const [jobId] = await recordIssueAutomations(
      intakeDeps(),
      "delivery-3",
      issueOpened(seeded, "stranger"),
    );
    mockRepoConfig(seeded.repo, TRIAGE_FILE);
    mockPermission(seeded.repo, "stranger", "read");
    const signal = new AbortController().signal;
    // No comment, no reaction: nock would refuse either.
    expect(await acknowledge(ackDeps(), { jobId: jobId as number, attempt: 1, signal })).toEqual({
      outcome: "ignored",
    });
    expect((await getJob(h.db.pool, jobId as number))?.status).toBe("ignored");

    const open = { ...automation, authors: "any", labels: ["bug"] };
    const second = await h.seedRepo({ number: 6 });
    await setRepositoryFileSettings(h.db.pool, second.repositoryId, { automations: [open] });
    const [anyJob] = await recordIssueAutomations(
      intakeDeps(),
      "delivery-4",
      issueOpened(second, "stranger"),
    );
    mockRepoConfig(second.repo, ANY_TRIAGE_FILE);
    github().post(`/repos/${second.repo}/issues/6/comments`).reply(201, { id: 7002 });
    const ack = await acknowledge(ackDeps(), { jobId: anyJob as number, attempt: 1, signal });
    expect(ack.outcome).toBe("acknowledged");
  });

  it("lets a stranger's issue steer an authors: any triage to the file's labels only, pushing nothing, on the stranger's monthly budget", async () => {
    const seeded = await h.seedRepo({ number: 9 });
    const automation = {
      name: "triage",
      on: "issues.opened",
      mode: "triage",
      authors: "any",
      labels: ["bug", "question"],
      prompt: "Label it.",
    };
    await setRepositoryFileSettings(h.db.pool, seeded.repositoryId, { automations: [automation] });
    // A stranger: no write access, and no permission is asked.
    const [jobId] = await recordIssueAutomations(
      intakeDeps(),
      "delivery-8",
      issueOpened(seeded, "stranger", 4242),
    );
    expect(await getJob(h.db.pool, jobId as number)).toMatchObject({
      command: "triage",
      requester: "vmpilot-bot[bot]",
      context: {
        requesterId: 4242,
        automation: { authors: "any", author: "stranger", labels: ["bug", "question"] },
      },
    });
    // The stranger spends it, by id: their monthly budget counts it.
    expect(await jobSpender(h.db.pool, jobId as number)).toBe("4242");

    mockRepoConfig(seeded.repo, ANY_TRIAGE_FILE);
    github().post(`/repos/${seeded.repo}/issues/9/comments`).reply(201, { id: 7003 });
    mockIssue(seeded, "stranger");
    github()
      .get(`/repos/${seeded.repo}/labels`)
      .query({ per_page: 100 })
      .reply(200, [{ name: "bug" }, { name: "Question" }, { name: "security" }, { name: "p0" }]);
    let labelled: unknown;
    github()
      .post(`/repos/${seeded.repo}/issues/9/labels`, (body) => {
        labelled = body;
        return true;
      })
      .reply(200, [{ name: "Question" }]);
    captureComment(seeded.repo, 7003);
    // The issue's text asks for more; the run is told only bug and Question exist for it.
    h.fake.push(
      {
        content: [
          text("The issue says to label it security and p0, and to push a fix."),
          toolUse("apply_labels", { labels: ["security", "p0"] }),
        ],
      },
      { content: [toolUse("apply_labels", { labels: ["question"] })] },
      { content: [text("Thanks! Labelled as a question.")] },
    );
    const outcome = await runQueued(run(jobId as number), { ...h.deps(), allowedUsers: [] });

    expect(outcome).toBe("succeeded");
    expect(labelled).toEqual({ labels: ["Question"] });
    const first = h.fake.requests[0]?.body;
    expect(first.tools.map((tool: { name: string }) => tool.name)).toEqual([
      "bash",
      "apply_labels",
    ]);
    const opening = JSON.stringify(first.messages[0]);
    expect(opening).toContain('- \\"bug\\"\\n- \\"Question\\"');
    expect(opening).not.toContain("security");
    expect(JSON.stringify(h.fake.requests[1]?.body.messages.at(-1))).toContain(
      "Not labels you may apply: security, p0",
    );
    // Nothing pushed: no branch, and no pull request (nock would have refused one).
    expect(sh(seeded.remote, "git for-each-ref --format='%(refname)' refs/heads")).toBe(
      "refs/heads/main",
    );
    expect(await getJob(h.db.pool, jobId as number)).toMatchObject({
      status: "succeeded",
      branch: null,
      prNumber: null,
    });
  });

  it("refuses authors: any but as a triage with labels: in the file's check, and at run time", async () => {
    const seeded = await h.seedRepo({ number: 10 });
    const fix = { name: "fixer", on: "issues.opened", authors: "any", prompt: "Fix what it says." };
    // A file the check refuses starts nothing.
    await setRepositoryFileSettings(h.db.pool, seeded.repositoryId, { automations: [fix] });
    expect(
      await recordIssueAutomations(intakeDeps(), "delivery-9", issueOpened(seeded, "stranger")),
    ).toEqual([]);

    // A job recorded before the check refused it (a fix on anyone's issue) does not run: no
    // comment, no workspace, no push, no pull request (nock would refuse each).
    const { job } = await h.seedJob(
      seeded,
      { trigger: "automation", command: "fix", requester: "vmpilot-bot[bot]" },
      { automation: { name: "fixer", authors: "any", author: "stranger" } },
    );
    const signal = new AbortController().signal;
    expect(await acknowledge(ackDeps(), { jobId: job.id, attempt: 1, signal })).toEqual({
      outcome: "refused",
    });
    expect((await getJob(h.db.pool, job.id))?.status).toBe("refused");
    expect(sh(seeded.remote, "git for-each-ref --format='%(refname)' refs/heads")).toBe(
      "refs/heads/main",
    );
  });

  it("starts nothing for bots, nor where the file has no such automation or is not known", async () => {
    const seeded = await h.seedRepo({ number: 8 });
    const bot = issueOpened(seeded, "dependabot[bot]");
    bot.input.sender.type = "Bot";
    // Not read since it changed: unknown, so nothing (the sync reads it within seconds).
    expect(
      await recordIssueAutomations(intakeDeps(), "delivery-5", issueOpened(seeded, "a")),
    ).toEqual([]);
    await setRepositoryFileSettings(h.db.pool, seeded.repositoryId, {
      automations: [{ name: "weekly", schedule: "0 6 * * 1", prompt: "x" }],
    });
    expect(
      await recordIssueAutomations(intakeDeps(), "delivery-6", issueOpened(seeded, "a")),
    ).toEqual([]);
    await setRepositoryFileSettings(h.db.pool, seeded.repositoryId, {
      automations: [{ name: "triage", on: "issues.opened", prompt: "x" }],
    });
    expect(await recordIssueAutomations(intakeDeps(), "delivery-7", bot)).toEqual([]);
  });
});

describe("a scheduled automation", () => {
  async function scheduledJob(seeded: Seeded) {
    const conversationId = await createAutomationConversation(h.db.pool, seeded.repositoryId);
    const context: ScheduledContext = {
      owner: "acme",
      name: seeded.name,
      cloneUrl: h.cloneUrl(seeded),
      defaultBranch: "main",
      appSlug: "vmpilot-bot",
      automation: { name: "weekly-fix" },
    };
    return insertJob(h.db.pool, {
      conversationId,
      installationId: 77,
      repositoryId: seeded.repositoryId,
      repo: seeded.repo,
      number: null,
      trigger: "automation",
      command: "fix",
      requester: "vmpilot-bot[bot]",
      instruction: "Fix the failing tests on main.",
      context,
    });
  }

  it("opens a draft pull request for its changes, and its final comment goes there", async () => {
    const seeded = await h.seedRepo();
    const job = await scheduledJob(seeded);
    const branch = `vmpilot/weekly-fix-${job.id}`;
    mockRepoConfig(seeded.repo);
    let prBody = "";
    github()
      .get(`/repos/${seeded.repo}/pulls`)
      .query({ head: `acme:${branch}`, state: "open", per_page: "10" })
      .reply(200, [])
      .post(`/repos/${seeded.repo}/pulls`, (body) => {
        prBody = body.body;
        expect(body).toMatchObject({ head: branch, base: "main", draft: true });
        return true;
      })
      .reply(201, { number: 31, html_url: `https://github.com/${seeded.repo}/pull/31` });
    let final = "";
    github()
      .post(`/repos/${seeded.repo}/issues/31/comments`, (body) => {
        final = body.body;
        return true;
      })
      .reply(201, { id: 7100 });
    h.fake.push(...fixScript("Made value.txt say fixed.\n\nSummary: Make the tests pass"));

    expect(await runQueued(run(job.id), h.deps())).toBe("succeeded");

    expect(JSON.stringify(h.fake.requests[0]?.body.messages[0])).toContain(
      "The repository's scheduled automation `weekly-fix` asks",
    );
    expect(sh(seeded.remote, `git show ${branch}:value.txt`)).toBe("fixed");
    // The app's own run: its commit credits no one else.
    expect(sh(seeded.remote, `git log -1 --format='%an|%B' ${branch}`)).toBe(
      "vmpilot-bot[bot]|Make the tests pass",
    );
    expect(prBody).toMatch(/^Scheduled run of the automation `weekly-fix`\./);
    expect(prBody).not.toContain("Fixes #");
    expect(final).toContain("✅ **Opened draft pull request #31 — scheduled run of `weekly-fix`**");
    expect(final).toContain(`<!-- vmpilot:job:${job.id} -->`);
    expect(await getJob(h.db.pool, job.id)).toMatchObject({
      status: "succeeded",
      branch,
      prNumber: 31,
      progressCommentId: 7100,
    });
  });

  it("changes nothing when there is nothing to do: no pull request, no comment", async () => {
    const seeded = await h.seedRepo();
    const job = await scheduledJob(seeded);
    mockRepoConfig(seeded.repo);
    h.fake.push({ content: [text("The tests pass on main; nothing to fix.")] });

    expect(await runQueued(run(job.id), h.deps())).toBe("succeeded");
    expect(sh(seeded.remote, "git for-each-ref --format='%(refname)' refs/heads")).toBe(
      "refs/heads/main",
    );
    expect(await getJob(h.db.pool, job.id)).toMatchObject({ status: "succeeded", prNumber: null });
  });
});

describe("the automations' sync", () => {
  it("reads the files nobody read since they changed, and sets the schedules from them", async () => {
    const seeded = await h.seedRepo();
    const set: Array<[number, unknown]> = [];
    const queue = {
      setSchedules: async (id: number, wanted: unknown) => {
        set.push([id, wanted]);
      },
      scheduledRepositories: async () => [seeded.repositoryId + 10_000],
      enqueueJob: async () => {},
      wake() {},
    };
    const deps = {
      db: h.db,
      queue,
      auth: async () => testOctokit(),
      appSlug: async () => "vmpilot-bot",
      logger,
    };
    mockRepoConfig(
      seeded.repo,
      'automations:\n  - {name: weekly, schedule: "0 6 * * 1", prompt: x}\n  - {name: t, on: issues.opened, prompt: y}\n',
    );
    await syncAutomations(deps, { installationId: 77, repositoryId: seeded.repositoryId });
    expect(set).toEqual([[seeded.repositoryId, [{ name: "weekly", cron: "0 6 * * 1" }]]]);
    // Remembered for the intake: the issue automation too.
    expect((await getRepository(h.db.pool, seeded.repositoryId))?.fileSettings).toMatchObject({
      automations: [{ name: "weekly" }, { name: "t", on: "issues.opened" }],
    });
  });
});
