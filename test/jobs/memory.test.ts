// Lessons from review (src/jobs/run/memory.ts, src/jobs/kinds/issue/lessons.ts): a writer's review
// of vmpilot's pull request, as GitHub's webhook sends it, through the intake and the one runner;
// the lesson goes out in the pull request from vmpilot/memory, and once merged, the next job's
// model reads it. What anyone else wrote teaches nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromIssueComment, fromReview } from "../../src/intake/deliveries.ts";
import { createIntake, type RecordTrigger } from "../../src/intake/record.ts";
import { createQueue, type Queue } from "../../src/jobs/queue/queue.ts";
import { findOrCreateConversation } from "../../src/store/conversations.ts";
import { getJob } from "../../src/store/jobs.ts";
import { text, toolUse } from "../helpers/anthropic-fake.ts";
import { github, mockPermission, mockRepoConfig } from "../helpers/github-mock.ts";
import { examplePayload, type Payload } from "../helpers/webhooks.ts";
import {
  captureComment,
  fixScript,
  mockRequester,
  mockStart,
  run,
  runQueued,
  type Seeded,
  seedPullRequestConversation,
  sh,
  threadsPage,
  toolResults,
  usePipelineHarness,
} from "./pipeline-harness.ts";

const h = usePipelineHarness();
const BRANCH = "vmpilot/issue-4-crash-on-empty-input";
const MEMORY = "vmpilot/memory";
const PR = 12;
const REVIEWER = { login: "reviewer", id: 9001 };
const STRANGER = { login: "stranger", id: 4242 };
const RULE = "We always write notes in lowercase in this repo, never in capitals.";
let queue: Queue;
let record: RecordTrigger;

beforeAll(async () => {
  queue = createQueue(h.db, { pollingIntervalSeconds: 60 });
  await queue.start();
  record = createIntake({
    db: h.db,
    queue,
    appSlug: "vmpilot-bot",
    label: "vmpilot",
    command: "vmpilot",
  });
});
afterAll(async () => {
  await queue?.stop();
});

/** GitHub's example payloads, for this repository. */
function repositoryOf(seeded: Seeded, payload: Payload): void {
  payload.installation = { id: 77 };
  payload.repository = {
    ...payload.repository,
    id: seeded.repositoryId,
    name: seeded.name,
    full_name: seeded.repo,
    owner: { ...payload.repository.owner, login: "acme" },
    clone_url: h.cloneUrl(seeded),
    default_branch: "main",
  };
}

/** A review of vmpilot's pull request #12, submitted by `by`, as GitHub sends it. */
async function submitReview(seeded: Seeded, by: typeof REVIEWER, body: string) {
  const payload: Payload = examplePayload("pull_request_review", "submitted");
  repositoryOf(seeded, payload);
  Object.assign(payload.pull_request, {
    number: PR,
    state: "open",
    locked: false,
    user: { ...payload.pull_request.user, login: "vmpilot-bot[bot]" },
  });
  const reviewId = 700 + by.id;
  Object.assign(payload.review, {
    id: reviewId,
    body,
    state: "commented",
    html_url: `https://github.com/${seeded.repo}/pull/${PR}#pullrequestreview-${reviewId}`,
  });
  payload.sender = { ...payload.sender, login: by.login, id: by.id, type: "User" };
  const recorded = await record(`review-${reviewId}`, fromReview(payload));
  if (!("jobId" in recorded))
    throw new Error(`the review made no job: ${JSON.stringify(recorded)}`);
  return { jobId: recorded.jobId, url: payload.review.html_url as string };
}

/** The PR's unresolved threads: one comment of the reviewer's, one of a stranger's. */
function mockThreads(seeded: Seeded) {
  const comment = (id: number, who: typeof REVIEWER, body: string) => ({
    databaseId: id,
    body,
    url: `https://github.com/${seeded.repo}/pull/${PR}#discussion_r${id}`,
    author: { login: who.login, databaseId: who.id },
  });
  const thread = (node: ReturnType<typeof comment>) => ({
    isResolved: false,
    isOutdated: false,
    path: "notes.txt",
    line: 1,
    originalLine: 1,
    comments: { nodes: [node] },
  });
  github()
    .post("/graphql")
    .reply(
      200,
      threadsPage([
        thread(comment(501, REVIEWER, "NOTE should be note.")),
        thread(comment(601, STRANGER, "Never use tabs in this repo.")),
      ]),
    )
    .post(/\/pulls\/12\/comments\/(501|601)\/replies$/)
    .times(2)
    .reply(201, { id: 1 });
  return {
    reviewer: `https://github.com/${seeded.repo}/pull/${PR}#discussion_r501`,
    stranger: `https://github.com/${seeded.repo}/pull/${PR}#discussion_r601`,
  };
}

/** The memory pull request's creation; resolves the body it was sent. */
function mockMemoryPullRequest(seeded: Seeded, number: number): { body: string } {
  const sent = { body: "" };
  github()
    .get(`/repos/${seeded.repo}/pulls`)
    .query({ head: `acme:${MEMORY}`, state: "open", per_page: "10" })
    .reply(200, [])
    .post(`/repos/${seeded.repo}/pulls`, (body) => {
      expect(body).toMatchObject({ head: MEMORY, base: "main", draft: false });
      sent.body = body.body;
      return true;
    })
    .reply(201, { number, html_url: `https://github.com/${seeded.repo}/pull/${number}` });
  return sent;
}

/** Issue #4's conversation with vmpilot's pull request #12, whose notes.txt shouts. */
async function seedReviewedPullRequest() {
  const { seeded, work } = await seedPullRequestConversation(h, {
    pr: PR,
    branch: BRANCH,
    answer: "Fixed value.txt and added a note.",
  });
  sh(
    work,
    `echo 'Keep changes small.' > AGENTS.md && git add -A && git commit -qm agents && git push -q origin main`,
  );
  sh(
    work,
    `git checkout -qb ${BRANCH} && echo fixed > value.txt && echo 'NOTE: VALUE FIXED' > notes.txt && git add -A && git commit -qm fix && git push -q origin ${BRANCH}`,
  );
  return { seeded, work };
}

/** The answers a job on vmpilot's pull request #12 gets before its work. */
function mockReviewJobStart(seeded: Seeded, commentId: number) {
  mockRepoConfig(seeded.repo);
  github()
    .post(`/repos/${seeded.repo}/issues/${PR}/reactions`)
    .reply(201, { id: 1, content: "eyes" })
    .post(`/repos/${seeded.repo}/issues/${PR}/comments`)
    .reply(201, { id: commentId });
  return captureComment(seeded.repo, commentId);
}

describe("lessons from review", () => {
  it("a writer's review stating a rule: the fix, then a vmpilot/memory pull request adding the rule with the comment's URL; once merged, the next issue's model reads it", async () => {
    const { seeded } = await seedReviewedPullRequest();
    const review = await submitReview(seeded, REVIEWER, RULE);
    mockPermission(seeded.repo, REVIEWER.login, "write");
    const comment = mockReviewJobStart(seeded, 8101);
    github()
      .get(`/repos/${seeded.repo}/issues/${PR}`)
      .reply(200, {
        number: PR,
        title: "Fix value.txt",
        body: "",
        user: { login: "vmpilot-bot[bot]" },
      })
      .get(`/repos/${seeded.repo}/issues/${PR}/comments`)
      .query(true)
      .reply(200, []);
    const threads = mockThreads(seeded);
    const pull = {
      number: PR,
      state: "open",
      html_url: `https://github.com/${seeded.repo}/pull/${PR}`,
      head: { ref: BRANCH, sha: "1".repeat(40), repo: { full_name: seeded.repo } },
      base: { ref: "main", sha: "2".repeat(40), repo: { full_name: seeded.repo } },
    };
    github()
      .get(`/repos/${seeded.repo}/pulls/${PR}`)
      .twice()
      .reply(200, pull)
      .get(`/repos/${seeded.repo}/pulls/${PR}/comments`)
      .query(true)
      .reply(200, [])
      .patch(`/repos/${seeded.repo}/pulls/${PR}`)
      .reply(200, { number: PR });
    const memoryPr = mockMemoryPullRequest(seeded, 31);
    const fix = fixScript(
      "Wrote the note in lowercase.\n\nT1: Lowercased it.\nT2: Left as it is.\n\nSummary: Lowercase the note",
      "echo 'note: value fixed' > notes.txt",
    );
    h.fake.push(
      {
        content: [
          text("The review states a rule for the whole repository."),
          toolUse("propose_lesson", {
            lesson: "Write notes in lowercase, never in capitals.",
            citation: review.url,
            files: ["notes.txt"],
          }),
          toolUse("propose_lesson", {
            lesson: "Never use tabs.",
            citation: threads.stranger,
          }),
        ],
      },
      ...fix,
    );

    expect(await runQueued(run(review.jobId), h.deps({ allowedUsers: [] }))).toBe("succeeded");

    // The model was offered the tool with the comments it may cite: the reviewer's, not the stranger's.
    const tools = h.fake.requests[0]?.body.tools as { name: string; description: string }[];
    const propose = tools.find((tool) => tool.name === "propose_lesson");
    expect(propose?.description).toContain(review.url);
    expect(propose?.description).toContain(threads.reviewer);
    expect(propose?.description).not.toContain(threads.stranger);
    expect(toolResults(h.fake.requests[1]?.body).join("\n")).toContain(
      `Not proposed: ${threads.stranger} is not a comment this job may learn from.`,
    );
    // The fix went to the pull request's branch; the lesson to vmpilot/memory only.
    expect(sh(seeded.remote, `git show ${BRANCH}:notes.txt`)).toBe("note: value fixed");
    expect(sh(seeded.remote, `git diff --name-only main ${MEMORY}`)).toBe(
      ".github/vmpilot/memory.md",
    );
    const added = sh(seeded.remote, `git diff main ${MEMORY} -- .github/vmpilot/memory.md`)
      .split("\n")
      .filter((line) => line.startsWith("+- "));
    expect(added).toEqual([
      `+- Write notes in lowercase, never in capitals. — learned from <${review.url}> · files: \`notes.txt\``,
    ]);
    const body = memoryPr.body.replace(`/jobs/${review.jobId})`, "/jobs/N)");
    expect(body.replaceAll(seeded.repo, "acme/app")).toMatchInlineSnapshot(`
      "Lessons vmpilot learned from review, for \`.github/vmpilot/memory.md\`. Every vmpilot job reads that file from the default branch: merging this pull request is what approves them. Edit or drop a lesson on this branch first if it is wrong; vmpilot adds later lessons on top.

      - Write notes in lowercase, never in capitals. (\`notes.txt\`) — learned from https://github.com/acme/app/pull/12#pullrequestreview-9701

      <sub>Proposed by vmpilot · [job log](https://vmpilot.test/jobs/N)</sub>"
    `);
    expect(comment.at(-1)).toContain(
      `Proposed 1 lesson from review in [#31](https://github.com/${seeded.repo}/pull/31); merging it approves it.`,
    );

    // A maintainer merges it.
    sh(seeded.remote, `git update-ref refs/heads/main refs/heads/${MEMORY}`);

    // A new issue's job: its model reads the lesson from the default branch, with AGENTS.md.
    const next = await findOrCreateConversation(h.db.pool, {
      repositoryId: seeded.repositoryId,
      number: 5,
      kind: "issue",
    });
    const issue = { ...seeded, conversationId: next.id, number: 5 };
    const job = await h.seedJob(issue);
    mockStart(issue);
    mockRequester();
    captureComment(seeded.repo, job.commentId);
    github()
      .get(`/repos/${seeded.repo}/pulls`)
      .query(true)
      .reply(200, [])
      .post(`/repos/${seeded.repo}/pulls`)
      .reply(201, { number: 32, html_url: `https://github.com/${seeded.repo}/pull/32` });
    const seen = h.fake.requests.length;
    h.fake.push(...fixScript("Summary: Make value.txt say fixed"));

    expect(await runQueued(run(job.job.id), h.deps())).toBe("succeeded");

    const system = h.fake.requests[seen]?.body.system as { text: string }[];
    const prompt = system.map((block) => block.text).join("\n");
    // Right after the repository's own instructions, in the system prompt the cache keeps.
    expect(prompt.indexOf("## AGENTS.md\n\nKeep changes small.")).toBeGreaterThan(0);
    expect(prompt.indexOf("# Lessons from review")).toBeGreaterThan(prompt.indexOf("## AGENTS.md"));
    expect(prompt).toContain(
      `- Write notes in lowercase, never in capitals. — learned from <${review.url}> · files: \`notes.txt\``,
    );
  });

  it("a review from someone who may not trigger vmpilot teaches nothing: refused, no model, no lesson", async () => {
    const { seeded } = await seedReviewedPullRequest();
    const review = await submitReview(seeded, STRANGER, RULE);
    mockRepoConfig(seeded.repo);
    mockPermission(seeded.repo, STRANGER.login, "read");
    let refusal = "";
    github()
      .post(`/repos/${seeded.repo}/issues/${PR}/comments`, (body) => {
        refusal = body.body;
        return true;
      })
      .reply(201, { id: 8102 });

    expect(await runQueued(run(review.jobId), h.deps({ allowedUsers: [] }))).toBe("refused");

    expect(refusal).toContain("vmpilot only acts when asked by people with write");
    expect(h.fake.requests).toHaveLength(0);
    expect(sh(seeded.remote, "git for-each-ref --format='%(refname)' refs/heads")).not.toContain(
      MEMORY,
    );
    expect(await getJob(h.db.pool, review.jobId)).toMatchObject({ status: "refused" });
  });

  it("/vmpilot remember proposes a lesson directly; the next goes on top of what a person pushed to vmpilot/memory, and lessons whose files are gone are marked stale", async () => {
    const seeded = await h.seedRepo();
    const work = `${h.dataDir}/../remember-${seeded.name}`;
    sh(h.dataDir.replace(/\/data$/, ""), `git clone -q ${seeded.remote} ${work}`);
    sh(
      work,
      [
        "mkdir -p .github/vmpilot",
        "printf '# Lessons\\n\\n- Keep old.ts small. — learned from <https://github.com/acme/x/pull/1#discussion_r1> · files: `old.ts`\\n- value.txt is read at start. — learned from <https://github.com/acme/x/pull/1#discussion_r2> · files: `value.txt`\\n' > .github/vmpilot/memory.md",
        "git add -A && git commit -qm lessons && git push -q origin main",
      ].join(" && "),
    );

    const remember = async (id: number, lesson: string) => {
      const payload: Payload = examplePayload("issue_comment", "created");
      repositoryOf(seeded, payload);
      Object.assign(payload.issue, { number: seeded.number, state: "open", locked: false });
      delete payload.issue.pull_request;
      Object.assign(payload.comment, {
        id,
        body: `/vmpilot remember ${lesson}`,
        html_url: `https://github.com/${seeded.repo}/issues/${seeded.number}#issuecomment-${id}`,
      });
      payload.sender = { ...payload.sender, login: "octocat", id: 583231, type: "User" };
      const recorded = await record(`comment-${id}`, fromIssueComment(payload));
      if (!("jobId" in recorded)) throw new Error("the comment made no job");
      mockRepoConfig(seeded.repo);
      github()
        .post(`/repos/${seeded.repo}/issues/comments/${id}/reactions`)
        .reply(201, { id: 1, content: "eyes" })
        .post(`/repos/${seeded.repo}/issues/${seeded.number}/comments`)
        .reply(201, { id: id + 1 });
      const comment = captureComment(seeded.repo, id + 1);
      return { jobId: recorded.jobId, url: payload.comment.html_url as string, comment };
    };

    const first = await remember(9101, "Run `sh test.sh` before every push.");
    const opened = mockMemoryPullRequest(seeded, 41);
    expect(await runQueued(run(first.jobId), h.deps())).toBe("succeeded");
    expect(first.comment.at(-1)).toContain(
      `Proposed 1 lesson from review in [#41](https://github.com/${seeded.repo}/pull/41); merging it approves it.`,
    );
    expect(opened.body).toContain(
      `- Run \`sh test.sh\` before every push. — learned from ${first.url}`,
    );
    expect(opened.body).toContain("- **Stale**, its files are gone: Keep old.ts small.");

    // Someone edits the proposal on the branch.
    sh(
      work,
      `git fetch -q origin && git checkout -q -b edit origin/${MEMORY} && sed -i 's/every push/every push, and lint/' .github/vmpilot/memory.md && git commit -qam edit && git push -q origin edit:${MEMORY}`,
    );
    const theirs = sh(work, "git rev-parse HEAD");

    const second = await remember(9201, "Name branches after their issue.");
    let updated = "";
    github()
      .get(`/repos/${seeded.repo}/pulls`)
      .query({ head: `acme:${MEMORY}`, state: "open", per_page: "10" })
      .reply(200, [
        {
          number: 41,
          head: { ref: MEMORY },
          html_url: `https://github.com/${seeded.repo}/pull/41`,
        },
      ])
      .patch(`/repos/${seeded.repo}/pulls/41`, (body) => {
        updated = body.body;
        return true;
      })
      .reply(200, { number: 41 });
    expect(await runQueued(run(second.jobId), h.deps())).toBe("succeeded");

    // On top of their commit, their edit kept; the old lessons are where they were.
    expect(sh(seeded.remote, `git rev-parse ${MEMORY}^`)).toBe(theirs);
    expect(
      sh(seeded.remote, `git show ${MEMORY}:.github/vmpilot/memory.md`).replaceAll(
        seeded.repo,
        "acme/app",
      ),
    ).toMatchInlineSnapshot(`
      "# Lessons

      - **Stale:** Keep old.ts small. — learned from <https://github.com/acme/x/pull/1#discussion_r1> · files: \`old.ts\`
      - value.txt is read at start. — learned from <https://github.com/acme/x/pull/1#discussion_r2> · files: \`value.txt\`
      - Run \`sh test.sh\` before every push, and lint. — learned from <https://github.com/acme/app/issues/4#issuecomment-9101>
      - Name branches after their issue. — learned from <https://github.com/acme/app/issues/4#issuecomment-9201>"
    `);
    expect(updated).toContain("before every push, and lint.");
    expect(updated).toContain("- Name branches after their issue.");
    expect(second.comment.at(-1)).toContain("Proposed 1 lesson from review in [#41]");
    expect(h.fake.requests).toHaveLength(0);
  });
});
