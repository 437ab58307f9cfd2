// plan then approve, retry, review, review threads, stop and a retried attempt, each through the
// real pipeline (sandbox, git, PGlite) with GitHub and the model faked at their HTTP edges.
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { SUMMARY_REQUEST } from "../../src/agent/compaction.ts";
import { getCompaction } from "../../src/store/compactions.ts";
import { getJob } from "../../src/store/jobs.ts";
import { listMessages } from "../../src/store/messages.ts";
import { type FakeReply, overloaded, text, toolUse } from "../helpers/anthropic-fake.ts";
import { github, mockRepoConfig } from "../helpers/github-mock.ts";
import { processesWith, waitUntil } from "../workspace/helpers.ts";
import {
  captureComment,
  fixScript,
  lastTurn,
  mockNewPr,
  mockRequester,
  mockStart,
  NOTHING_FOUND,
  run,
  runQueued,
  type Seeded,
  sh,
  threadsPage,
  usePipelineHarness,
} from "./pipeline-harness.ts";

const h = usePipelineHarness();
const branch = "vmpilot/issue-4-crash-on-empty-input";

/** A pull request from a branch of the same repository, as GET /pulls/:n shows it. */
function mockForeignPr(seeded: Seeded) {
  const sha = sh(seeded.remote, "git rev-parse feature/x");
  github()
    .get(`/repos/${seeded.repo}/pulls/9`)
    .reply(200, {
      number: 9,
      head: { ref: "feature/x", sha, repo: { full_name: seeded.repo } },
      base: { ref: "main" },
    })
    .get(`/repos/${seeded.repo}/pulls/9`)
    .matchHeader("accept", /diff/)
    .reply(200, "diff --git a/branch.txt b/branch.txt\n+feature/x\n", {
      "content-type": "text/plain; charset=utf-8",
    })
    .get(`/repos/${seeded.repo}/pulls/9/comments`)
    .query(true)
    .reply(200, []);
  return sha;
}

const prContext = (seeded: Seeded, target: object) => ({
  itemKind: "pull_request" as const,
  title: "Add feature x",
  htmlUrl: `https://github.com/${seeded.repo}/pull/9`,
  target: target as { type: "issue" },
});

describe("pipeline commands", () => {
  it("plan posts a plan without touching the repository; approve carries it out in the same conversation", async () => {
    const seeded = await h.seedRepo();
    const plan = await h.seedJob(seeded, {
      trigger: "command",
      command: "plan",
      instruction: "how would you fix this?",
      triggerCommentId: 801,
    });
    mockStart(seeded);
    const planComment = captureComment(seeded.repo, plan.commentId);
    h.fake.push(
      (request) => {
        expect(request.body.tools.map((t: { name: string }) => t.name)).toEqual(["bash"]);
        expect(lastTurn(request.body)).toContain("asks for a plan only");
        return { content: [toolUse("bash", { command: "cat value.txt test.sh" })] };
      },
      { content: [text("Plan:\n1. Change value.txt to `fixed`.\n2. Run `sh test.sh`.")] },
    );

    expect(await runQueued(run(plan.job.id), h.deps())).toBe("succeeded");
    const planned = planComment.at(-1) ?? "";
    expect(planned).toContain("**Plan ready**");
    expect(planned).toContain("1. Change value.txt to `fixed`.");
    expect(planned).toContain("`/vmpilot fix`");
    expect(sh(seeded.remote, "git for-each-ref --format='%(refname)' refs/heads")).toBe(
      "refs/heads/main",
    );

    const approve = await h.seedJob(seeded, {
      trigger: "mention",
      instruction: "approve",
      triggerCommentId: 802,
    });
    mockStart(seeded);
    mockRequester();
    mockNewPr(seeded);
    const comment = captureComment(seeded.repo, approve.commentId);
    const [first, ...rest] = fixScript("Done as planned.\n\nSummary: Fix value.txt");
    h.fake.push(
      (request) => {
        expect(lastTurn(request.body)).toContain("approved the plan you proposed above");
        expect(JSON.stringify(request.body.messages)).toContain("1. Change value.txt to `fixed`.");
        return first as FakeReply;
      },
      ...rest,
    );

    expect(await runQueued(run(approve.job.id), h.deps())).toBe("succeeded");
    expect(sh(seeded.remote, `git show ${branch}:value.txt`)).toBe("fixed");
    expect(comment.at(-1)).toContain("Opened draft pull request #12");
  });

  it("stores a compacted conversation, and the conversation's next job starts from it", async () => {
    const seeded = await h.seedRepo();
    const first = await h.seedJob(seeded, { trigger: "command", command: "plan" });
    mockStart(seeded);
    captureComment(seeded.repo, first.commentId);
    const look = (command: string) => ({ content: [toolUse("bash", { command })] });
    h.fake.push(
      look("cat value.txt"),
      look("cat test.sh"),
      // A prompt this large makes the loop compact before its next request.
      { ...look("ls"), usage: { input_tokens: 900_000 } },
      (request) => {
        expect(lastTurn(request.body)).toContain(SUMMARY_REQUEST.slice(0, 40));
        return { content: [text("Looked at value.txt and test.sh; value.txt must say fixed.")] };
      },
      { content: [text("Plan:\n1. Write fixed into value.txt.")] },
    );
    expect(await runQueued(run(first.job.id), h.deps())).toBe("succeeded");
    // Instruction + three tool rounds were stored when the loop compacted them into a summary
    // and the last three rounds; the final answer came after.
    const compaction = await getCompaction(h.db.pool, seeded.conversationId);
    expect(compaction?.coveredMessages).toBe(7);
    expect(JSON.stringify(compaction?.messages[0])).toContain("value.txt must say fixed");
    expect(await listMessages(h.db.pool, seeded.conversationId)).toHaveLength(8);

    const second = await h.seedJob(seeded, { trigger: "command", command: "plan" });
    mockStart(seeded);
    captureComment(seeded.repo, second.commentId);
    h.fake.push((request) => {
      const messages = request.body.messages;
      expect(JSON.stringify(messages[0])).toContain("replaced by this summary");
      expect(JSON.stringify(messages)).not.toContain("<github_context>\n# Crash");
      // The summary and the three rounds it kept, the final answer, then the new request.
      expect(messages).toHaveLength(9);
      return { content: [text("Plan:\n1. Same as before.")] };
    });
    expect(await runQueued(run(second.job.id), h.deps())).toBe("succeeded");
  });

  it("retry runs the conversation's last request again", async () => {
    const seeded = await h.seedRepo();
    const failed = await h.seedJob(seeded, {
      trigger: "command",
      instruction: "please make value.txt say fixed",
      triggerCommentId: 700,
    });
    mockStart(seeded);
    captureComment(seeded.repo, failed.commentId);
    h.fake.push(overloaded(), overloaded(), overloaded());
    expect(await runQueued(run(failed.job.id), h.deps())).toBe("failed");

    const retry = await h.seedJob(seeded, {
      trigger: "command",
      command: "retry",
      instruction: "",
      triggerCommentId: 701,
    });
    mockStart(seeded);
    mockRequester();
    mockNewPr(seeded);
    const comment = captureComment(seeded.repo, retry.commentId);
    const [first, ...rest] = fixScript("Summary: Fix value.txt");
    h.fake.push(
      (request) => {
        expect(lastTurn(request.body)).toContain("asked to retry");
        expect(lastTurn(request.body)).toContain("please make value.txt say fixed");
        return first as FakeReply;
      },
      ...rest,
    );

    expect(await runQueued(run(retry.job.id), h.deps())).toBe("succeeded");
    expect(comment.at(-1)).toContain("Opened draft pull request #12");
  });

  it("retry with nothing before it says so", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded, { command: "retry", trigger: "command" });
    mockRepoConfig(seeded.repo);
    const comment = captureComment(seeded.repo, commentId);
    expect(await runQueued(run(job.id), h.deps())).toBe("succeeded");
    expect(comment.at(-1)).toContain("There is nothing to retry");
  });

  it("review posts one review, inline where the diff allows", async () => {
    const seeded = await h.seedRepo({ number: 9, kind: "pull_request", branches: ["feature/x"] });
    const { job, commentId } = await h.seedJob(
      seeded,
      { trigger: "command", command: "review", instruction: "" },
      prContext(seeded, { type: "issue_comment", id: 555 }),
    );
    mockStart(seeded);
    const sha = mockForeignPr(seeded);
    let review: Record<string, unknown> = {};
    github()
      .get(`/repos/${seeded.repo}/pulls/9/files`)
      .query(true)
      .reply(200, [{ filename: "branch.txt", patch: "@@ -0,0 +1 @@\n+feature/x" }])
      .post(`/repos/${seeded.repo}/pulls/9/reviews`, (body) => {
        review = body;
        return true;
      })
      .reply(200, {
        id: 1,
        html_url: `https://github.com/${seeded.repo}/pull/9#pullrequestreview-1`,
      });
    const comment = captureComment(seeded.repo, commentId);
    h.fake.push(
      (request) => {
        expect(request.body.system.map((b: { text: string }) => b.text).join()).toContain(
          "## code_review",
        );
        return { content: [toolUse("bash", { command: "git diff origin/main...HEAD" })] };
      },
      {
        content: [
          text(
            "Request changes: one nit.\n\n`branch.txt:1` — **nit**: say why.\n\n`value.txt:1` — **question**: is this used?",
          ),
        ],
      },
    );

    expect(await runQueued(run(job.id), h.deps())).toBe("succeeded");
    expect(review).toMatchObject({
      commit_id: sha,
      event: "COMMENT",
      comments: [{ path: "branch.txt", line: 1, side: "RIGHT", body: "**nit**: say why." }],
    });
    expect(review.body).toContain("Request changes: one nit.");
    expect(review.body).toContain("`value.txt:1` **question**: is this used?");
    expect(comment.at(-1)).toContain("Posted a review with 1 inline comment");
    expect(sh(seeded.remote, "git rev-parse feature/x")).toBe(sha);
  });

  it("a submitted review: the unresolved threads become one job, pushed to the PR branch, answered per thread", async () => {
    const seeded = await h.seedRepo({ number: 9, kind: "pull_request", branches: ["feature/x"] });
    const { job, commentId } = await h.seedJob(
      seeded,
      { trigger: "review", instruction: "" },
      prContext(seeded, { type: "review", id: 77 }),
    );
    mockStart(seeded);
    const before = mockForeignPr(seeded);
    mockRequester();
    const thread = (id: number, path: string, body: string) => ({
      isResolved: false,
      isOutdated: false,
      path,
      line: 1,
      originalLine: 1,
      comments: { nodes: [{ databaseId: id, body, author: { login: "reviewer" } }] },
    });
    const replies: Record<string, string> = {};
    github()
      .post("/graphql")
      .reply(
        200,
        threadsPage([
          thread(501, "value.txt", "Should say fixed."),
          thread(601, "branch.txt", "Why this name?"),
        ]),
      )
      .post(/\/repos\/acme\/app\d+\/pulls\/9\/comments\/(501|601)\/replies/)
      .times(2)
      .reply(async (request: Request) => {
        const id = new URL(request.url).pathname.split("/")[7] as string;
        replies[id] = ((await request.json()) as { body: string }).body;
        return [201, { id: 1 }];
      });
    const comment = captureComment(seeded.repo, commentId);
    const [first, second, third] = fixScript("");
    h.fake.push(
      (request) => {
        expect(lastTurn(request.body)).toContain("[T1] value.txt:1");
        expect(lastTurn(request.body)).toContain("[T2] branch.txt:1");
        return first as FakeReply;
      },
      second as FakeReply,
      third as FakeReply,
      {
        content: [
          text(
            "Done.\n\nT1: Changed value.txt to fixed.\nT2: Kept the name; it matches the branch.",
          ),
        ],
      },
      NOTHING_FOUND,
    );

    expect(await runQueued(run(job.id), h.deps())).toBe("succeeded");
    const after = sh(seeded.remote, "git rev-parse feature/x");
    expect(sh(seeded.remote, `git rev-parse ${after}^`)).toBe(before);
    expect(sh(seeded.remote, "git show feature/x:value.txt")).toBe("fixed");
    expect(replies).toEqual({
      "501": "Changed value.txt to fixed.",
      "601": "Kept the name; it matches the branch.",
    });
    const final = comment.at(-1) ?? "";
    expect(final).toContain(`Pushed ${after.slice(0, 10)} to this pull request`);
    expect(final).toContain(`[#9](https://github.com/${seeded.repo}/pull/9)`);
  });

  it("a review on a fork's pull request is refused politely: its threads would need a push", async () => {
    const seeded = await h.seedRepo({ number: 9, kind: "pull_request" });
    const { job, commentId } = await h.seedJob(
      seeded,
      { trigger: "review", instruction: "" },
      prContext(seeded, { type: "review", id: 78 }),
    );
    mockStart(seeded);
    github()
      .get(`/repos/${seeded.repo}/pulls/9`)
      .reply(200, {
        number: 9,
        head: { ref: "main", sha: "a".repeat(40), repo: { full_name: "stranger/app" } },
        base: { ref: "main" },
      })
      .get(`/repos/${seeded.repo}/pulls/9`)
      .reply(200, "diff", { "content-type": "text/plain; charset=utf-8" })
      .get(`/repos/${seeded.repo}/pulls/9/comments`)
      .query(true)
      .reply(200, []);
    const comment = captureComment(seeded.repo, commentId);
    expect(await runQueued(run(job.id), h.deps())).toBe("refused");
    expect(comment.at(-1)).toContain(
      "This pull request comes from stranger/app, where vmpilot has no push rights. `fix` answers here with suggestions",
    );
  });

  it("stop kills the running command within seconds and pushes nothing", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded);
    mockStart(seeded);
    const comment = captureComment(seeded.repo, commentId);
    const marker = `stop-test-${randomUUID()}`;
    // The marker is the inner shell's $0, so the command's process shows it whichever way the
    // workspace hands the command over (the workspace agent's shell reads it from a pipe).
    const command = `sh -c 'sleep 300; true' ${marker}`;
    h.fake.push({ content: [toolUse("bash", { command })] });
    const controller = new AbortController();
    const running = runQueued(run(job.id, 1, controller.signal), h.deps());
    expect(await waitUntil(async () => (await processesWith(marker)).length > 0, 20_000)).toBe(
      true,
    );
    controller.abort(new Error("job cancelled"));

    expect(await running).toBe("cancelled");
    expect(await waitUntil(async () => (await processesWith(marker)).length === 0)).toBe(true);
    expect(comment.at(-1)).toContain("**Stopped**");
    expect(sh(seeded.remote, "git for-each-ref --format='%(refname)' refs/heads")).toBe(
      "refs/heads/main",
    );
    expect(await getJob(h.db.pool, job.id)).toMatchObject({ status: "cancelled" });
  });

  it("an attempt that failed after its agent ran is taken up again: same comment, same conversation, one pull request, the model paid once", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded);
    mockStart(seeded);
    mockRequester();
    github()
      .get(`/repos/${seeded.repo}/pulls`)
      .query(true)
      .reply(200, [])
      .post(`/repos/${seeded.repo}/pulls`)
      .times(4)
      .reply(500, { message: "Server Error" });
    const comment = captureComment(seeded.repo, commentId);
    h.fake.push(...fixScript("Summary: Fix value.txt"));
    await expect(runQueued(run(job.id, 1), h.deps())).rejects.toMatchObject({ status: 500 });
    expect(comment.at(-1)).toContain("Retrying");
    const firstAttempt = await listMessages(h.db.pool, seeded.conversationId);

    // GitHub had opened the pull request after all; the next attempt finds it by its branch, and
    // delivers the run the first one kept.
    mockStart(seeded);
    mockRequester();
    github()
      .get(`/repos/${seeded.repo}/pulls`)
      .query(true)
      .reply(200, [
        {
          number: 12,
          head: { ref: branch },
          html_url: `https://github.com/${seeded.repo}/pull/12`,
        },
      ])
      .patch(`/repos/${seeded.repo}/pulls/12`)
      .reply(200, { number: 12 });

    expect(await runQueued(run(job.id, 2), h.deps())).toBe("succeeded");
    // The run and its second look, both kept: the model is not asked again.
    expect(h.fake.requests).toHaveLength(5);
    expect(comment.at(-1)).toContain("Updated pull request #12");
    expect(sh(seeded.remote, `git log --format=%s main..${branch}`)).toBe("Fix value.txt");
    expect(await listMessages(h.db.pool, seeded.conversationId)).toEqual(firstAttempt);
    expect(await getJob(h.db.pool, job.id)).toMatchObject({ status: "succeeded", prNumber: 12 });
  });
});
