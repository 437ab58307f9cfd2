// The base of vmpilot's pull request moves: a real push payload through the intake, the queue and
// the worker, with real git against the loopback git server, the real sandbox, the Anthropic fake
// and GitHub's REST API mocked with nock.
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { recordBasePush } from "../../src/intake/base-push.ts";
import { createQueue, type Queue } from "../../src/jobs/queue/queue.ts";
import { startWorker } from "../../src/jobs/worker.ts";
import { pushState, recordPush } from "../../src/store/ci-loop.ts";
import { getJob } from "../../src/store/jobs.ts";
import { type FakeStep, text, toolUse } from "../helpers/anthropic-fake.ts";
import { jobFinished } from "../helpers/db.ts";
import { github, mockPermission, mockRepoConfig } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";
import { examplePayload, type Payload } from "../helpers/webhooks.ts";
import {
  captureComment,
  lastTurn,
  runQueued,
  type Seeded,
  seedPullRequestConversation,
  sh,
  usePipelineHarness,
} from "./pipeline-harness.ts";

const h = usePipelineHarness();
const BRANCH = "vmpilot/issue-4-crash-on-empty-input";
const PR = 12;
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
let queue: Queue;

// Per test: the pipeline talks to that test's Anthropic fake.
beforeEach(async () => {
  queue = createQueue(h.db, { pollingIntervalSeconds: 0.5, retryLimit: 0 });
  await queue.start();
  await startWorker({
    db: h.db,
    queue,
    auth: async () => testOctokit(),
    allowedUsers: [],
    publicUrl: "https://vmpilot.test",
    logger: quiet,
    work: h.deps(),
    mergeablePoll: { attempts: 3, delayMs: 0 },
  });
});
afterEach(async () => {
  await queue?.stop();
});

/**
 * A repository whose pull request #12 (vmpilot's fix of issue #4) and whose main branch both
 * added notes.txt since they parted; `baseChange` decides whether the base's notes.txt differs.
 * Returns the pushed base's payload and the pull request's head before the merge.
 */
async function seedMovedBase(baseNotes: string) {
  // The conversation so far, which the merge continues.
  const { seeded, jobId, work } = await seedPullRequestConversation(h, {
    pr: PR,
    branch: BRANCH,
    answer: "Fixed value.txt and noted it.",
  });
  sh(
    work,
    `git checkout -qb ${BRANCH} && echo fixed > value.txt && printf 'notes\\npr: value.txt says fixed\\n' > notes.txt && git add -A && git commit -qm fix && git push -q origin ${BRANCH}`,
  );
  sh(
    work,
    `git checkout -q main && printf '${baseNotes}' > notes.txt && git add -A && git commit -qm base && git push -q origin main`,
  );
  const context = (await getJob(h.db.pool, jobId))?.context as { cloneUrl: string };
  const head = sh(work, `git rev-parse ${BRANCH}`);
  // The branch's head is vmpilot's push.
  await recordPush(h.db.pool, seeded.conversationId, head, jobId);
  return {
    seeded,
    work,
    payload: pushPayload(seeded, context.cloneUrl, sh(work, "git rev-parse main")),
    head,
    base: sh(work, "git rev-parse main"),
  };
}

/** GitHub's push example, as GitHub would send it for this push to main. */
function pushPayload(seeded: Seeded, cloneUrl: string, after: string, ref = "refs/heads/main") {
  const payload: Payload = examplePayload("push");
  payload.installation = { id: 77 };
  Object.assign(payload, { ref, after, created: false, deleted: false });
  payload.repository = {
    ...payload.repository,
    id: seeded.repositoryId,
    name: seeded.name,
    full_name: seeded.repo,
    html_url: `https://github.com/${seeded.repo}`,
    clone_url: cloneUrl,
    default_branch: "main",
  };
  return payload;
}

/** The pull request as GitHub tells of it, its head at `head`. */
function mockPull(seeded: Seeded, mergeable: boolean | null, head: string) {
  return github()
    .get(`/repos/${seeded.repo}/pulls/${PR}`)
    .reply(200, {
      number: PR,
      state: "open",
      mergeable,
      mergeable_state: mergeable === null ? "unknown" : mergeable ? "clean" : "dirty",
      head: { ref: BRANCH, sha: head, repo: { full_name: seeded.repo } },
      base: { ref: "main", sha: "1".repeat(40), repo: { full_name: seeded.repo } },
    });
}

/** GitHub's side of a merge job whose pull request conflicts; returns the final comment's bodies. */
function mockConflictingRun(seeded: Seeded, head: string): string[] {
  // GitHub has not worked it out at first.
  mockPull(seeded, null, head);
  mockPull(seeded, false, head);
  mockRepoConfig(seeded.repo);
  mockPermission(seeded.repo, "octocat", "write");
  const commentId = 8800;
  github().post(`/repos/${seeded.repo}/issues/${PR}/comments`).reply(201, { id: commentId });
  return captureComment(seeded.repo, commentId);
}

const BOTH_NOTES =
  "printf 'notes\\nbase: value.txt is read at start\\npr: value.txt says fixed\\n' > notes.txt";

/** The model resolving notes.txt with `command`, testing and reporting; `beforeReport` runs as it reports. */
function resolveScript(command = BOTH_NOTES, beforeReport = () => {}): FakeStep[] {
  return [
    { content: [text("Resolving notes.txt."), toolUse("bash", { command })] },
    { content: [toolUse("bash", { command: "sh test.sh && echo ok" })] },
    () => {
      beforeReport();
      return { content: [toolUse("report_tests", { outcome: "passed", command: "sh test.sh" })] };
    },
    { content: [text("Kept the base's note and this pull request's, one after the other.")] },
  ];
}

async function mirrorsOf(seeded: Seeded): Promise<string[]> {
  const mirrors = join(h.dataDir, "mirrors");
  if (!existsSync(mirrors)) return [];
  return (await readdir(mirrors)).filter((name) => name.includes(seeded.name));
}

describe("a moved base", () => {
  it("merges a conflicting base into vmpilot's pull request, the agent resolving the conflict, and pushes the merge with the tests passing", async () => {
    const moved = await seedMovedBase("notes\\nbase: value.txt is read at start\\n");
    const { seeded } = moved;
    const comment = mockConflictingRun(seeded, moved.head);
    h.fake.push(...resolveScript());

    const [jobId, ...others] = await recordBasePush(
      { db: h.db, queue },
      "push-conflict",
      moved.payload,
    );
    expect(others).toEqual([]);
    const done = await jobFinished(h.db, jobId as number);
    expect(done.status).toBe("succeeded");

    // A merge commit on top of the old head, with the new base as its second parent.
    const [merge, ...parents] = sh(seeded.remote, `git rev-list --parents -n 1 ${BRANCH}`).split(
      " ",
    );
    expect(parents).toEqual([moved.head, moved.base]);
    expect(sh(seeded.remote, `git show ${merge}:notes.txt`)).toBe(
      "notes\nbase: value.txt is read at start\npr: value.txt says fixed",
    );
    expect(sh(seeded.remote, `git show ${merge}:value.txt`)).toBe("fixed");
    expect(sh(seeded.remote, `git log -1 --format=%s ${BRANCH}`)).toBe(`Merge main into ${BRANCH}`);
    // vmpilot's push now: a check failing on the merge is its to fix.
    expect(await pushState(h.db.pool, seeded.conversationId)).toEqual({ sha: merge, jobId });

    // The same conversation, told which file conflicts.
    const first = h.fake.requests[0]?.body;
    expect(JSON.stringify(first.messages[0])).toContain("Fix the crash on empty input");
    expect(lastTurn(first)).toContain("`notes.txt`");
    expect(lastTurn(first)).toContain("conflict marker");
    const final = comment.at(-1) ?? "";
    expect(final).toContain("Merged `main` into this pull request");
    expect(final).toContain("conflicts resolved in `notes.txt`");
    expect(final).toContain("✔ passed");
  });

  it("pushes a merge commit when the conflict is resolved wholly to the pull request's side", async () => {
    const moved = await seedMovedBase("notes\\nbase: value.txt is read at start\\n");
    const { seeded } = moved;
    mockConflictingRun(seeded, moved.head);
    h.fake.push(...resolveScript("git checkout --ours notes.txt"));

    const [jobId] = await recordBasePush({ db: h.db, queue }, "push-ours", moved.payload);
    expect((await jobFinished(h.db, jobId as number)).status).toBe("succeeded");
    const [merge, ...parents] = sh(seeded.remote, `git rev-list --parents -n 1 ${BRANCH}`).split(
      " ",
    );
    expect(parents).toEqual([moved.head, moved.base]);
    expect(sh(seeded.remote, `git diff ${moved.head} ${merge}`)).toBe("");
  });

  it("does not push over a commit a person pushed to the branch while the merge ran", async () => {
    const moved = await seedMovedBase("notes\\nbase: value.txt is read at start\\n");
    const { seeded } = moved;
    const comment = mockConflictingRun(seeded, moved.head);
    const person = join(h.dataDir, "..", `person-${seeded.name}`);
    h.fake.push(
      ...resolveScript(BOTH_NOTES, () =>
        sh(
          join(h.dataDir, ".."),
          `git clone -q -b ${BRANCH} ${seeded.remote} ${person} && cd ${person} && echo mine > person.txt && git add -A && git commit -qm mine && git push -q origin ${BRANCH}`,
        ),
      ),
    );

    const [jobId] = await recordBasePush({ db: h.db, queue }, "push-raced", moved.payload);
    // The plain push only fast-forwards: git refuses it, the job fails, the person's commit stays.
    expect((await jobFinished(h.db, jobId as number)).status).toBe("failed");
    expect(sh(seeded.remote, `git rev-parse ${BRANCH}`)).toBe(sh(person, "git rev-parse HEAD"));
    expect(comment.at(-1)).toContain("Reason: git push failed");
    expect(comment.at(-1)).toContain("Updates were rejected");
  });

  it("refuses, with a note, to merge the base into a branch a person pushed to after vmpilot", async () => {
    const moved = await seedMovedBase("notes\\nbase: value.txt is read at start\\n");
    const { seeded, work } = moved;
    sh(
      work,
      `git checkout -q ${BRANCH} && echo mine > person.txt && git add -A && git commit -qm mine && git push -q origin ${BRANCH}`,
    );
    const theirs = sh(work, "git rev-parse HEAD");
    mockPull(seeded, null, theirs);
    mockPull(seeded, false, theirs);
    let note = "";
    github()
      .post(`/repos/${seeded.repo}/issues/${PR}/comments`, (body) => {
        note = body.body;
        return true;
      })
      .reply(201, { id: 8801 });

    const [jobId] = await recordBasePush({ db: h.db, queue }, "push-theirs", moved.payload);
    expect(await jobFinished(h.db, jobId as number)).toMatchObject({
      status: "refused",
      error: "someone pushed to the branch after vmpilot",
    });
    expect(note).toBe(
      "⏸ `main` moved and this pull request no longer merges with it, but vmpilot did not merge it: someone pushed to the branch after vmpilot, and does not build on their commits. Merge `main` into the branch yourself.",
    );
    // No workspace, no model, no push: the person's commit is still the head.
    expect(h.fake.requests).toEqual([]);
    expect(await mirrorsOf(seeded)).toEqual([]);
    expect(sh(seeded.remote, `git rev-parse ${BRANCH}`)).toBe(theirs);
  });

  it("starts nothing when the pull request still merges: no workspace, no model, no comment", async () => {
    const moved = await seedMovedBase("notes\\n");
    const { seeded } = moved;
    mockPull(seeded, null, moved.head);
    mockPull(seeded, true, moved.head);
    const [jobId] = await recordBasePush({ db: h.db, queue }, "push-clean", moved.payload);
    expect((await jobFinished(h.db, jobId as number)).status).toBe("ignored");
    expect(h.fake.requests).toEqual([]);
    expect(await mirrorsOf(seeded)).toEqual([]);
    expect(sh(seeded.remote, `git rev-parse ${BRANCH}`)).toBe(moved.head);
  });

  it("starts nothing for a push to a branch that is no pull request's base", async () => {
    const moved = await seedMovedBase("notes\\nbase\\n");
    const { seeded } = moved;
    const payload = pushPayload(
      seeded,
      moved.payload.repository.clone_url,
      moved.head,
      `refs/heads/${BRANCH}`,
    );
    expect(await recordBasePush({ db: h.db, queue }, "push-branch", payload)).toEqual([]);
    expect(await mirrorsOf(seeded)).toEqual([]);
  });

  it("asks GitHub a bounded number of times, then gives up without acting", async () => {
    const seeded = await h.seedRepo();
    const { job } = await h.seedJob(seeded, {
      trigger: "base_push",
      number: PR,
      branch: BRANCH,
      prNumber: PR,
    });
    for (let i = 0; i < 3; i++) mockPull(seeded, null, "0".repeat(40));
    const poll = { attempts: 3, delayMs: 0 };
    const attempt = {
      jobId: job.id,
      attempt: 1,
      maxAttempts: 1,
      signal: new AbortController().signal,
    };
    expect(await runQueued(attempt, { ...h.deps(), mergeablePoll: poll })).toBe("ignored");
    expect((await getJob(h.db.pool, job.id))?.status).toBe("ignored");
  });
});
