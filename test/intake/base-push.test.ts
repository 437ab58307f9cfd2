// A push to the base branch of vmpilot's pull requests, recorded by the intake alone: one job per
// pull request of vmpilot's that GitHub may now find conflicting, none for anything else, and
// none twice for one pushed commit. Real push payloads, PGlite and PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordBasePush } from "../../src/intake/base-push.ts";
import { createQueue, type Queue } from "../../src/jobs/queue/queue.ts";
import { findOrCreateConversation, linkConversationToPr } from "../../src/store/conversations.ts";
import type { Database } from "../../src/store/database.ts";
import { upsertRepository } from "../../src/store/installations.ts";
import { insertJob, listJobs } from "../../src/store/jobs.ts";
import { markPullRequestClosed } from "../../src/store/pull-request-conversations.ts";
import { databases } from "../helpers/db.ts";
import { examplePayload, type Payload } from "../helpers/webhooks.ts";

const AFTER = "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c";
let nextRepository = 9100;

function push(repositoryId: number, ref: string, after = AFTER): Payload {
  const payload = examplePayload("push");
  payload.installation = { id: 3 };
  payload.ref = ref;
  payload.before = "6113728f27ae82c7b1a177c8d03f9e96e0adf246";
  payload.after = after;
  payload.created = false;
  payload.deleted = false;
  payload.repository = {
    ...payload.repository,
    id: repositoryId,
    name: `r${repositoryId}`,
    full_name: `acme/r${repositoryId}`,
    html_url: `https://github.com/acme/r${repositoryId}`,
    clone_url: `https://github.com/acme/r${repositoryId}.git`,
    default_branch: "main",
  };
  return payload;
}

describe.each(databases())("a push to the base on $name", (target) => {
  let db: Database;
  let queue: Queue;

  beforeAll(async () => {
    db = await target.open();
    queue = createQueue(db, { pollingIntervalSeconds: 60 });
    await queue.start();
  });
  afterAll(async () => {
    await queue?.stop();
    await db?.close();
  });

  const mergeJobs = async (repositoryId: number) =>
    (await listJobs(db.pool, { repositoryId })).filter((job) => job.trigger === "base_push");

  /**
   * A conversation on issue `number` whose person-triggered job opened pull request `pr` from
   * `branch`.
   */
  async function conversationWithPr(
    repositoryId: number,
    number: number,
    pr?: number,
    branch?: string,
  ) {
    const conversation = await findOrCreateConversation(db.pool, {
      repositoryId,
      number,
      kind: "issue",
    });
    await insertJob(db.pool, {
      conversationId: conversation.id,
      installationId: 3,
      repositoryId,
      repo: `acme/r${repositoryId}`,
      number,
      trigger: "label",
      command: "fix",
      requester: "octocat",
      context: {
        owner: "acme",
        name: `r${repositoryId}`,
        itemKind: "issue",
        title: `Issue ${number}`,
        htmlUrl: `https://github.com/acme/r${repositoryId}/issues/${number}`,
        cloneUrl: `https://github.com/acme/r${repositoryId}.git`,
        defaultBranch: "main",
        target: { type: "issue" },
        appSlug: "vmpilot-bot",
        command: "vmpilot",
        requesterId: 583231,
        label: "vmpilot",
      },
    });
    if (pr !== undefined) await linkConversationToPr(db.pool, conversation.id, pr, branch);
    return conversation;
  }

  it("makes one merge job per open pull request of vmpilot's, on its conversation, once per pushed commit", async () => {
    const repo = nextRepository++;
    await upsertRepository(db.pool, { id: repo, installationId: 3, fullName: `acme/r${repo}` });
    const ours = await conversationWithPr(repo, 1, 11, "vmpilot/issue-1-crash");
    await conversationWithPr(repo, 2, 12, "someones-feature");
    await conversationWithPr(repo, 3);
    const closed = await conversationWithPr(repo, 4, 14, "vmpilot/issue-4-old");
    await markPullRequestClosed(db.pool, closed.id);

    const ids = await recordBasePush(
      { db, queue },
      `push-${repo}-a`,
      push(repo, "refs/heads/main"),
    );
    expect(ids).toHaveLength(1);
    const [job, ...more] = await mergeJobs(repo);
    expect(more).toEqual([]);
    expect(job).toMatchObject({
      id: ids[0],
      conversationId: ours.id,
      number: 11,
      prNumber: 11,
      branch: "vmpilot/issue-1-crash",
      trigger: "base_push",
      requester: "octocat",
      deliveryId: `push-${repo}-a`,
      context: {
        itemKind: "pull_request",
        htmlUrl: `https://github.com/acme/r${repo}/pull/11`,
        requesterId: 583231,
        defaultBranch: "main",
      },
    });

    // The same push delivered again under another id, as a replayed body would be.
    expect(
      await recordBasePush({ db, queue }, `push-${repo}-b`, push(repo, "refs/heads/main")),
    ).toEqual([]);
    // A later commit on the base is a new reason to look.
    const later = push(repo, "refs/heads/main", "a".repeat(40));
    expect(await recordBasePush({ db, queue }, `push-${repo}-c`, later)).toHaveLength(1);
  });

  it("makes none for a push to another branch, a deleted base, or a tag", async () => {
    const repo = nextRepository++;
    await upsertRepository(db.pool, { id: repo, installationId: 3, fullName: `acme/r${repo}` });
    await conversationWithPr(repo, 1, 11, "vmpilot/issue-1-crash");
    const deleted = { ...push(repo, "refs/heads/main"), deleted: true, after: "0".repeat(40) };
    for (const [id, payload] of [
      ["feature", push(repo, "refs/heads/vmpilot/issue-1-crash")],
      ["deleted", deleted],
      ["tag", push(repo, "refs/tags/main")],
    ] as const) {
      expect(await recordBasePush({ db, queue }, `push-${repo}-${id}`, payload)).toEqual([]);
    }
    expect(await mergeJobs(repo)).toEqual([]);
  });
});
