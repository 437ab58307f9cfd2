// The ready-for-review check on its own: what keeps a draft a draft, and that a head is marked
// ready once however many passed suites ask. PGlite, GitHub mocked with nock.
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
    github()
      .post("/graphql")
      .reply(200, { data: null, errors: [{ message: "Something went wrong" }] });
    await expect(runReadyCheck(deps(), check, signal)).rejects.toThrow(/Something went wrong/);

    for (let i = 0; i < 2; i++) {
      mockPull(conversation.repo);
      mockSuites(conversation.repo, [["completed", "success"]]);
    }
    github()
      .post("/graphql")
      .reply(200, MUTATED)
      .get(`/user/${REQUESTER_ID}`)
      .reply(200, { login: "octocat", id: REQUESTER_ID })
      .post(`/repos/${conversation.repo}/pulls/${PR}/requested_reviewers`)
      .reply(201, {})
      .post(`/repos/${conversation.repo}/issues/${PR}/comments`)
      .reply(201, { id: 1 });
    await Promise.all([runReadyCheck(deps(), check, signal), runReadyCheck(deps(), check, signal)]);
    // One mutation, one review request, one note: a second would find no mock.
    expectGitHubDone();
  });

  it("asks the requester by user id for the review: their login now, after a rename", async () => {
    const conversation = await pushed();
    const check = { conversationId: conversation.conversationId, sha: SHA, grace: false };
    mockPull(conversation.repo);
    mockSuites(conversation.repo, [["completed", "success"]]);
    let reviewers: unknown;
    let note = "";
    github()
      .post("/graphql")
      .reply(200, MUTATED)
      .get(`/user/${REQUESTER_ID}`)
      .reply(200, { login: "octo-renamed", id: REQUESTER_ID })
      .post(`/repos/${conversation.repo}/pulls/${PR}/requested_reviewers`, (body) => {
        reviewers = body.reviewers;
        return true;
      })
      .reply(201, {})
      .post(`/repos/${conversation.repo}/issues/${PR}/comments`, (body) => {
        note = body.body;
        return true;
      })
      .reply(201, { id: 1 });
    await runReadyCheck(deps(), check, signal);
    // Not "octocat": that login may be someone else's now.
    expect(reviewers).toEqual(["octo-renamed"]);
    expect(note).toBe(
      `✅ The checks passed on ${SHA.slice(0, 10)}: this pull request is ready for review. @octo-renamed, please review it.`,
    );
  });
});
