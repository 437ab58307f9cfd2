// Checks on vmpilot's own pull requests, as GitHub tells of them: real check_run, check_suite,
// workflow_run and status payloads POSTed to the real server (web role: nothing runs the jobs),
// which makes one fix job per failed head vmpilot pushed last and nothing for anyone else's.
import { beforeAll, describe, expect, it } from "vitest";
import { fromStatus } from "../../src/intake/ci-status.ts";
import { MalformedDelivery } from "../../src/intake/deliveries.ts";
import { recordPush } from "../../src/store/ci-loop.ts";
import { findOrCreateConversation, linkConversationToPr } from "../../src/store/conversations.ts";
import { upsertRepository } from "../../src/store/installations.ts";
import { insertJob, listJobs } from "../../src/store/jobs.ts";
import { useGitHubMock } from "../helpers/github-mock.ts";
import { useTestServer } from "../helpers/test-server.ts";
import { examplePayload, type Payload } from "../helpers/webhooks.ts";

useGitHubMock();
const t = useTestServer({ role: "web" });

// GitHub's examples are of Codertocat/Hello-World; its pull requests name the repository by id.
const REPO_ID = 186853002;
const REPO = "Codertocat/Hello-World";
const INSTALLATION = 4100;
let nextIssue = 1;

interface PushedPr {
  conversationId: number;
  pr: number;
  branch: string;
  sha: string;
}

/**
 * A conversation whose job opened pull request #pr from a vmpilot branch and pushed `sha` there
 * last.
 */
async function pushedPr(): Promise<PushedPr> {
  const issue = nextIssue++;
  const pr = 100 + issue;
  const branch = `vmpilot/issue-${issue}-crash`;
  const sha = `${issue}`.padStart(2, "0").repeat(20);
  const conversation = await findOrCreateConversation(t.db.pool, {
    repositoryId: REPO_ID,
    number: issue,
    kind: "issue",
  });
  const job = await insertJob(t.db.pool, {
    conversationId: conversation.id,
    installationId: INSTALLATION,
    repositoryId: REPO_ID,
    repo: REPO,
    number: issue,
    trigger: "label",
    command: "fix",
    requester: "octocat",
    context: {
      owner: "Codertocat",
      name: "Hello-World",
      itemKind: "issue",
      title: "Crash",
      htmlUrl: `https://github.com/${REPO}/issues/${issue}`,
      cloneUrl: `https://github.com/${REPO}.git`,
      defaultBranch: "main",
      target: { type: "issue" },
      appSlug: "vmpilot-bot",
      command: "vmpilot",
      requesterId: 583231,
      label: "vmpilot",
    },
  });
  await linkConversationToPr(t.db.pool, conversation.id, pr, branch);
  await recordPush(t.db.pool, conversation.id, sha, job.id);
  return { conversationId: conversation.id, pr, branch, sha };
}

interface Run {
  conclusion: string;
  sha: string;
  branch: string;
  pr: number;
  /** The pull request's head repository; GitHub lists a fork's pull requests not at all. */
  headRepoId?: number | null;
}

/** The pull requests GitHub names in the payload, shaped as its check_run example has them. */
function pulls(run: Run): Payload[] {
  if (run.headRepoId === null) return [];
  const [pull] = examplePayload("check_run", "completed").check_run.pull_requests;
  pull.number = run.pr;
  pull.head = { ...pull.head, ref: run.branch, sha: run.sha };
  pull.head.repo = { ...pull.head.repo, id: run.headRepoId ?? REPO_ID };
  return [pull];
}

function checkRun(run: Run): Payload {
  const payload = examplePayload("check_run", "completed");
  payload.installation = { id: INSTALLATION };
  Object.assign(payload.check_run, { conclusion: run.conclusion, head_sha: run.sha });
  payload.check_run.pull_requests = pulls(run);
  Object.assign(payload.check_run.check_suite, { head_branch: run.branch, head_sha: run.sha });
  return payload;
}

function checkSuite(run: Run, suiteId = 118578147): Payload {
  const payload = examplePayload("check_suite", "completed");
  payload.installation = { id: INSTALLATION };
  Object.assign(payload.check_suite, {
    id: suiteId,
    conclusion: run.conclusion,
    head_sha: run.sha,
    head_branch: run.branch,
  });
  payload.check_suite.pull_requests = pulls(run);
  return payload;
}

function workflowRun(run: Run): Payload {
  const payload = examplePayload("workflow_run", "completed");
  payload.installation = { id: INSTALLATION };
  Object.assign(payload.workflow_run, {
    conclusion: run.conclusion,
    head_sha: run.sha,
    head_branch: run.branch,
    pull_requests: pulls(run),
  });
  return payload;
}

interface Status {
  state: string;
  sha: string;
  /** The branches GitHub lists as holding the commit, each at its own head. */
  branches: Array<{ name: string; head: string }>;
  id?: number;
}

/** GitHub's status example as Jenkins' plugin makes GitHub send it. */
function status(run: Status): Payload {
  const payload = examplePayload("status");
  payload.installation = { id: INSTALLATION };
  Object.assign(payload, {
    id: run.id ?? payload.id,
    sha: run.sha,
    state: run.state,
    context: "continuous-integration/jenkins/branch",
    description: "This commit cannot be built",
    target_url: "https://jenkins.example.com/job/Hello-World/job/vmpilot/1/display/redirect",
    branches: run.branches.map(({ name, head }) => ({
      name,
      commit: { sha: head, url: `https://api.github.com/repos/${REPO}/commits/${head}` },
      protected: false,
    })),
  });
  payload.commit.sha = run.sha;
  return payload;
}

/** A status on vmpilot's head, its branch listed at that head beside the default branch. */
function ownStatus(ours: PushedPr, state: string, id?: number): Payload {
  const branches = [
    { name: "master", head: "9".repeat(40) },
    { name: ours.branch, head: ours.sha },
  ];
  return status({ state, sha: ours.sha, branches, ...(id && { id }) });
}

/**
 * The fix job of vmpilot's failed head: on its pull request, for the person vmpilot served (the
 * gate and the review are theirs).
 */
function fixJob(ours: PushedPr) {
  return {
    conversationId: ours.conversationId,
    number: ours.pr,
    prNumber: ours.pr,
    trigger: "ci",
    command: "fix",
    requester: "octocat",
    status: "queued",
    context: {
      itemKind: "pull_request",
      htmlUrl: `https://github.com/${REPO}/pull/${ours.pr}`,
      headSha: ours.sha,
      requesterId: 583231,
    },
  };
}

async function ciJobs(conversationId: number) {
  return (await listJobs(t.db.pool, { conversationId })).filter((job) => job.trigger === "ci");
}

async function readyChecks(sha: string) {
  const { rows } = await t.db.pool.query<{ data: unknown }>(
    "SELECT data FROM pgboss.job WHERE name = 'vmpilot-ready' AND data->>'sha' = $1",
    [sha],
  );
  return rows.map((row) => row.data);
}

async function sendAll(payloads: Array<[string, Payload]>) {
  for (const [event, payload] of payloads) {
    expect((await t.send(event, payload)).status).toBe(200);
  }
}

beforeAll(async () => {
  await upsertRepository(t.db.pool, {
    id: REPO_ID,
    installationId: INSTALLATION,
    fullName: REPO,
  });
});

describe("a completed CI run on a pull request", () => {
  it("starts one fix job for vmpilot's failed head, whichever of the three events tells of it, and none again", async () => {
    const ours = await pushedPr();
    const run = { conclusion: "failure", ...ours };
    await sendAll([
      ["check_run", checkRun(run)],
      ["check_suite", checkSuite(run)],
      ["workflow_run", workflowRun(run)],
      // Another failed job of the same run, and the run failing again when someone reruns it.
      ["check_run", checkRun({ ...run, conclusion: "timed_out" })],
      ["workflow_run", workflowRun(run)],
    ]);
    const [job, ...more] = await ciJobs(ours.conversationId);
    expect(more).toEqual([]);
    expect(job).toMatchObject(fixJob(ours));
    expect(await readyChecks(ours.sha)).toEqual([]);
  });

  it("starts nothing for a person's branch, a fork, a head pushed after vmpilot's, or a run that did not fail", async () => {
    const ours = await pushedPr();
    const failed = { conclusion: "failure", ...ours };
    await sendAll([
      // A person's pull request: its branch is not vmpilot's.
      ["check_run", checkRun({ ...failed, branch: "feature/login" })],
      // A fork's pull request: GitHub lists none, or one whose head is another repository.
      ["check_suite", checkSuite({ ...failed, headRepoId: null })],
      ["check_run", checkRun({ ...failed, headRepoId: 999 })],
      // Someone pushed to vmpilot's branch after vmpilot did.
      ["workflow_run", workflowRun({ ...failed, sha: "f".repeat(40) })],
      ["check_run", checkRun({ ...failed, conclusion: "skipped" })],
      ["check_suite", checkSuite({ ...failed, conclusion: "cancelled" })],
      ["workflow_run", workflowRun({ ...failed, conclusion: "success" })],
      ["check_run", checkRun({ ...failed, conclusion: "success" })],
    ]);
    expect(await ciJobs(ours.conversationId)).toEqual([]);
    expect(await readyChecks(ours.sha)).toEqual([]);
    // A person's later head passing is no reason to mark anything ready either.
    await sendAll([
      ["check_suite", checkSuite({ ...failed, sha: "e".repeat(40), conclusion: "success" })],
    ]);
    expect(await readyChecks("e".repeat(40))).toEqual([]);
  });

  it("queues a ready-for-review check for each check suite that passed on vmpilot's head", async () => {
    const ours = await pushedPr();
    const passed = { conclusion: "success", ...ours };
    await sendAll([
      ["check_suite", checkSuite(passed, 1)],
      ["check_suite", checkSuite(passed, 1)],
      ["check_suite", checkSuite({ ...passed, conclusion: "neutral" }, 2)],
    ]);
    expect(await readyChecks(ours.sha)).toEqual([
      { conversationId: ours.conversationId, sha: ours.sha, grace: false },
      { conversationId: ours.conversationId, sha: ours.sha, grace: false },
    ]);
    expect(await ciJobs(ours.conversationId)).toEqual([]);
  });
});

describe("a commit status on a pull request", () => {
  it("starts one fix job for vmpilot's head when a status fails or errs, the same one a failed check starts", async () => {
    const ours = await pushedPr();
    await sendAll([
      ["status", ownStatus(ours, "failure")],
      ["status", ownStatus(ours, "error")],
      ["check_run", checkRun({ conclusion: "failure", ...ours })],
    ]);
    const [job, ...more] = await ciJobs(ours.conversationId);
    expect(more).toEqual([]);
    expect(job).toMatchObject(fixJob(ours));
    const { rows } = await t.db.pool.query(
      "SELECT event, trigger_key FROM deliveries WHERE id = $1",
      [job?.deliveryId],
    );
    expect(rows).toEqual([{ event: "status", trigger_key: `ci:${REPO_ID}:${ours.sha}` }]);
    expect(await readyChecks(ours.sha)).toEqual([]);
  });

  it("starts nothing on a person's branch, a fork's commit, a head a person pushed after vmpilot, or a status still pending", async () => {
    const ours = await pushedPr();
    const person = "e".repeat(40);
    await sendAll([
      // A person's own branch, even one named like vmpilot's.
      [
        "status",
        status({
          state: "failure",
          sha: "d".repeat(40),
          branches: [
            { name: "feature/login", head: "d".repeat(40) },
            { name: "vmpilot/issue-999-theirs", head: "d".repeat(40) },
          ],
        }),
      ],
      // A fork's pull request: its branch is not in this repository, so GitHub lists none.
      ["status", status({ state: "failure", sha: ours.sha, branches: [] })],
      // A person pushed on top of vmpilot's head: a late status of vmpilot's commit, and theirs.
      [
        "status",
        status({
          state: "failure",
          sha: ours.sha,
          branches: [{ name: ours.branch, head: person }],
        }),
      ],
      [
        "status",
        status({ state: "failure", sha: person, branches: [{ name: ours.branch, head: person }] }),
      ],
      ["status", ownStatus(ours, "pending")],
    ]);
    expect(await ciJobs(ours.conversationId)).toEqual([]);
    expect(await readyChecks(ours.sha)).toEqual([]);
    expect(await readyChecks(person)).toEqual([]);
  });

  it("queues a ready-for-review check for each status that passed on vmpilot's head", async () => {
    const ours = await pushedPr();
    await sendAll([
      ["status", ownStatus(ours, "success", 1)],
      // The same status redelivered, and another context passing.
      ["status", ownStatus(ours, "success", 1)],
      ["status", ownStatus(ours, "success", 2)],
    ]);
    expect(await readyChecks(ours.sha)).toEqual([
      { conversationId: ours.conversationId, sha: ours.sha, grace: false },
      { conversationId: ours.conversationId, sha: ours.sha, grace: false },
    ]);
    expect(await ciJobs(ours.conversationId)).toEqual([]);
  });

  it("refuses a status payload of another shape by the field that is wrong", () => {
    const payload = examplePayload("status");
    payload.installation = { id: INSTALLATION };
    expect(fromStatus(payload)).toMatchObject({
      state: "success",
      installation: { id: INSTALLATION },
    });
    payload.branches = [{ name: "vmpilot/x", commit: null }];
    expect(() => fromStatus(payload)).toThrow(MalformedDelivery);
    expect(() => fromStatus(payload)).toThrow("malformed status webhook: branches.0.commit: ");
  });
});
