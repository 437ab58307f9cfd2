// The ready-for-review check on its own: what keeps a draft a draft (a check suite or a commit
// status that has not passed), and that a head is marked ready once however many passes ask. PGlite, GitHub mocked with nock.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runReadyCheck } from "../../src/jobs/kinds/ready/run.ts";
import { recordPush } from "../../src/store/ci-loop.ts";
import { findOrCreateConversation, linkConversationToPr } from "../../src/store/conversations.ts";
import type { Database } from "../../src/store/database.ts";
import { setRepositorySettings, upsertRepository } from "../../src/store/installations.ts";
import { insertJob } from "../../src/store/jobs.ts";
import { openTestDatabase } from "../helpers/db.ts";
import { expectGitHubDone, github, useGitHubMock } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";

useGitHubMock();

const PR = 12;
/** The requester's GitHub user id; their login is "octocat" when the job was made. */
const REQUESTER_ID = 583231;
const SHA = "c".repeat(40);
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const signal = new AbortController().signal;
let db: Database;
let nextRepo = 7000;

beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await db?.close();
});

const deps = () => ({ db, auth: async () => testOctokit(), logger: quiet });

/**
 * A conversation whose job opened draft #12 and pushed SHA there last; returns the conversation and
 * its repo.
 */
async function pushed() {
  const repositoryId = nextRepo++;
  const repo = `acme/r${repositoryId}`;
  await upsertRepository(db.pool, { id: repositoryId, installationId: 77, fullName: repo });
  const conversation = await findOrCreateConversation(db.pool, {
    repositoryId,
    number: 4,
    kind: "issue",
  });
  const job = await insertJob(db.pool, {
    conversationId: conversation.id,
    installationId: 77,
    repositoryId,
    repo,
    number: 4,
    trigger: "label",
    command: "fix",
    requester: "octocat",
    context: {
      owner: "acme",
      name: `r${repositoryId}`,
      itemKind: "issue",
      title: "Crash",
      htmlUrl: `https://github.com/${repo}/issues/4`,
      cloneUrl: `https://github.com/${repo}.git`,
      defaultBranch: "main",
      target: { type: "issue" },
      appSlug: "vmpilot-bot",
      command: "vmpilot",
      label: "vmpilot",
      requesterId: REQUESTER_ID,
    },
  });
  await linkConversationToPr(db.pool, conversation.id, PR, "vmpilot/issue-4-crash");
  await recordPush(db.pool, conversation.id, SHA, job.id);
  return { conversationId: conversation.id, repo, repositoryId };
}

function mockPull(repo: string, head = SHA) {
  github()
    .get(`/repos/${repo}/pulls/${PR}`)
    .reply(200, {
      number: PR,
      node_id: "PR_node",
      state: "open",
      draft: true,
      head: { sha: head },
    });
}

function mockSuites(repo: string, suites: Array<[string, string | null]>) {
  github()
    .get(`/repos/${repo}/commits/${SHA}/check-suites`)
    .query({ per_page: 100 })
    .reply(200, {
      total_count: suites.length,
      check_suites: suites.map(([status, conclusion]) => ({
        status,
        conclusion,
        latest_check_runs_count: 1,
      })),
    });
}

const MUTATED = { data: { markPullRequestReadyForReview: { pullRequest: { isDraft: false } } } };

/** The head's combined commit status, asked for with one status: `state` over `count` contexts. */
function mockStatus(repo: string, state: string, count: number) {
  github()
    .get(`/repos/${repo}/commits/${SHA}/status`)
    .query({ per_page: 1 })
    .reply(200, { state, sha: SHA, total_count: count, statuses: [] });
}

/**
 * Marking the draft ready, asking the requester (whose login is `login` now) to review, and the
 * note; returns what was sent.
 */
function mockMarked(repo: string, login = "octocat") {
  const sent = { note: "", reviewers: undefined as unknown };
  github()
    .post("/graphql")
    .reply(200, MUTATED)
    .get(`/user/${REQUESTER_ID}`)
    .reply(200, { login, id: REQUESTER_ID })
    .post(`/repos/${repo}/pulls/${PR}/requested_reviewers`, (body) => {
      sent.reviewers = body.reviewers;
      return true;
    })
    .reply(201, {})
    .post(`/repos/${repo}/issues/${PR}/comments`, (body) => {
      sent.note = body.body;
      return true;
    })
    .reply(201, { id: 1 });
  return sent;
}

describe("the ready-for-review check", () => {
  it("keeps the draft while a check runs, after a check failed, and once someone pushed after vmpilot", async () => {
    const conversation = await pushed();
    const check = { conversationId: conversation.conversationId, sha: SHA, grace: false };
    mockPull(conversation.repo);
    mockSuites(conversation.repo, [
      ["completed", "success"],
      ["in_progress", null],
    ]);
    await runReadyCheck(deps(), check, signal);
    mockPull(conversation.repo);
    mockSuites(conversation.repo, [
      ["completed", "success"],
      ["completed", "failure"],
    ]);
    await runReadyCheck(deps(), check, signal);
    mockPull(conversation.repo, "d".repeat(40));
    await runReadyCheck(deps(), check, signal);
    // Nothing else was asked of GitHub: no mutation, no review request, no note.
    expectGitHubDone();
  });

  it("does nothing, asking GitHub nothing, for a stale head or with readyForReview off", async () => {
    const conversation = await pushed();
    await runReadyCheck(
      deps(),
      { conversationId: conversation.conversationId, sha: "e".repeat(40), grace: true },
      signal,
    );
    await setRepositorySettings(db.pool, conversation.repositoryId, { readyForReview: false });
    await runReadyCheck(
      deps(),
      { conversationId: conversation.conversationId, sha: SHA, grace: true },
      signal,
    );
    expectGitHubDone();
  });

  it("marks a head ready once when two passed suites ask at the same time, and gives the claim back when marking fails", async () => {
    const conversation = await pushed();
    const check = { conversationId: conversation.conversationId, sha: SHA, grace: false };
    mockPull(conversation.repo);
    mockSuites(conversation.repo, [["completed", "success"]]);
    mockStatus(conversation.repo, "pending", 0);
    github()
      .post("/graphql")
      .reply(200, { data: null, errors: [{ message: "Something went wrong" }] });
    await expect(runReadyCheck(deps(), check, signal)).rejects.toThrow(/Something went wrong/);

    for (let i = 0; i < 2; i++) {
      mockPull(conversation.repo);
      mockSuites(conversation.repo, [["completed", "success"]]);
      mockStatus(conversation.repo, "pending", 0);
    }
    mockMarked(conversation.repo);
    await Promise.all([runReadyCheck(deps(), check, signal), runReadyCheck(deps(), check, signal)]);
    // One mutation, one review request, one note: a second would find no mock.
    expectGitHubDone();
  });

  it("asks the requester by user id for the review: their login now, after a rename", async () => {
    const conversation = await pushed();
    const check = { conversationId: conversation.conversationId, sha: SHA, grace: false };
    mockPull(conversation.repo);
    mockSuites(conversation.repo, [["completed", "success"]]);
    mockStatus(conversation.repo, "pending", 0);
    const sent = mockMarked(conversation.repo, "octo-renamed");
    await runReadyCheck(deps(), check, signal);
    // Not "octocat": that login may be someone else's now.
    expect(sent.reviewers).toEqual(["octo-renamed"]);
    expect(sent.note).toBe(
      `✅ The checks passed on ${SHA.slice(0, 10)}: this pull request is ready for review. @octo-renamed, please review it.`,
    );
  });

  it("keeps the draft while a commit status is pending or failed, with or without a check suite, after the grace time too", async () => {
    const conversation = await pushed();
    const { repo } = conversation;
    const check = { conversationId: conversation.conversationId, sha: SHA, grace: true };
    for (const state of ["pending", "failure", "error"]) {
      mockPull(repo);
      // Only vmpilot's own suite, which never runs a check: a repository whose CI is statuses.
      mockSuites(repo, []);
      mockStatus(repo, state, 2);
    }
    mockPull(repo);
    mockSuites(repo, [["completed", "success"]]);
    mockStatus(repo, "failure", 1);
    for (let i = 0; i < 4; i++) await runReadyCheck(deps(), check, signal);
    // No mutation, no review request, no note.
    expectGitHubDone();
  });

  it("marks a head whose only CI is commit statuses ready once they passed, and one with neither only after the grace time", async () => {
    const conversation = await pushed();
    const { repo } = conversation;
    const check = { conversationId: conversation.conversationId, sha: SHA, grace: false };
    // Neither a check nor a status yet: too early to tell a repository without CI.
    mockPull(repo);
    mockSuites(repo, []);
    mockStatus(repo, "pending", 0);
    await runReadyCheck(deps(), check, signal);
    expectGitHubDone();

    mockPull(repo);
    mockSuites(repo, []);
    mockStatus(repo, "success", 2);
    const sent = mockMarked(repo);
    await runReadyCheck(deps(), check, signal);
    expect(sent.note).toMatchInlineSnapshot(
      `"✅ The checks passed on cccccccccc: this pull request is ready for review. @octocat, please review it."`,
    );
  });

  it("counts only the checks when the installation has not accepted the statuses permission", async () => {
    const conversation = await pushed();
    const { repo } = conversation;
    mockPull(repo);
    mockSuites(repo, []);
    github()
      .get(`/repos/${repo}/commits/${SHA}/status`)
      .query(true)
      .reply(403, { message: "Resource not accessible by integration" });
    const sent = mockMarked(repo);
    const check = { conversationId: conversation.conversationId, sha: SHA, grace: true };
    await runReadyCheck(deps(), check, signal);
    expect(sent.note).toMatchInlineSnapshot(
      `"✅ The tests passed on cccccccccc and no checks ran on it: this pull request is ready for review. @octocat, please review it."`,
    );
  });
});
