// The second look before the pull request (src/jobs/run/second-look.ts), through the one runner:
// the model is shown the job's whole diff and the request once the tests pass, and what it fixes
// goes out; what it breaks does not.
import { describe, expect, it } from "vitest";
import { listJobEvents } from "../../src/store/job-events.ts";
import { text, toolUse } from "../helpers/anthropic-fake.ts";
import { github } from "../helpers/github-mock.ts";
import {
  captureComment,
  fixScript,
  lastTurn,
  mockRequester,
  mockStart,
  pinnedText,
  plain,
  run,
  runQueued,
  type Seeded,
  sh,
  usePipelineHarness,
} from "./pipeline-harness.ts";

const h = usePipelineHarness();
const branch = "vmpilot/issue-4-crash-on-empty-input";

/** The draft pull request the job opens, its body kept. */
function capturePullRequest(seeded: Seeded): { body: string } {
  const opened = { body: "" };
  github()
    .get(`/repos/${seeded.repo}/pulls`)
    .query(true)
    .reply(200, [])
    .post(`/repos/${seeded.repo}/pulls`, (body) => {
      opened.body = body.body;
      return true;
    })
    .reply(201, { number: 21, html_url: `https://github.com/${seeded.repo}/pull/21` });
  return opened;
}

// The first passing diff leaves a debug script behind.
const DEBUG_FIX =
  "echo fixed > value.txt && echo 'echo \"DEBUG value=$(cat value.txt)\"' > debug.sh";

describe("the second look before the pull request", () => {
  it("shows the model the diff and the request, and the debug line it finds is gone before the pull request opens", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded, {
      trigger: "command",
      instruction: "make value.txt say fixed",
    });
    mockStart(seeded);
    mockRequester();
    captureComment(seeded.repo, commentId);
    const pr = capturePullRequest(seeded);
    const work = fixScript(
      "Made value.txt say fixed.\n\nSummary: Make value.txt say fixed",
      DEBUG_FIX,
    );
    h.fake.push(
      ...work.slice(0, -1),
      {
        content: [
          text("A debug script is left over."),
          toolUse("bash", { command: "rm debug.sh" }),
        ],
      },
      { content: [toolUse("report_tests", { outcome: "passed", command: "sh test.sh" })] },
      { content: [text("Found debug.sh, a debug script left from the fix; removed it.")] },
    );

    expect(await runQueued(run(job.id), h.deps())).toBe("succeeded");

    const look = h.fake.requests[4]?.body;
    const asked = JSON.parse(lastTurn(look)).content[0].text as string;
    expect(asked).toContain("take a second look");
    expect(asked).toContain("> make value.txt say fixed");
    expect(asked).toContain("diff --git a/debug.sh b/debug.sh");
    expect(asked).toContain('+echo "DEBUG value=$(cat value.txt)"');
    expect(asked).toContain("diff --git a/value.txt b/value.txt\n");
    // The same conversation goes on: the run's requests are the look's prefix, with its cache.
    const before = h.fake.requests[3]?.body;
    expect(look.system).toEqual(before.system);
    expect(look.tools).toEqual(before.tools);
    expect(look.messages.slice(0, before.messages.length).map(plain)).toEqual(
      before.messages.map(plain),
    );
    expect(h.fake.usages[4]?.cache_read_input_tokens).toBeGreaterThan(0);

    expect(sh(seeded.remote, `git ls-tree --name-only ${branch}`)).toBe("test.sh\nvalue.txt");
    expect(pinnedText(pr.body, job.id)).toMatchInlineSnapshot(`
      "Made value.txt say fixed.

      Summary: Make value.txt say fixed

      ---

      **Tests:** ✔ passed (\`sh test.sh\`)

      **Second look:** Found debug.sh, a debug script left from the fix; removed it.

      **Files changed (1):**
      - \`M\` value.txt

      **Run:** \`claude-sonnet-5-5\` · 7 steps · TOKENS · COST · TIME

      Asked by @octocat · [job log](https://vmpilot.test/jobs/N)

      Draft opened by vmpilot. Review it like any other pull request before merging.

      Fixes #4"
    `);
    const events = await listJobEvents(h.db.pool, job.id);
    expect(events.filter((e) => e.type === "second_look").map((e) => e.data.message)).toEqual([
      expect.stringMatching(/^A second look at the diff \(\d+ bytes\) before the pull request\.$/),
      "Second look: Found debug.sh, a debug script left from the fix; removed it.",
    ]);
  });

  it("undoes a look whose changes leave the tests worse than it found them: the first passing diff goes out", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded);
    mockStart(seeded);
    mockRequester();
    captureComment(seeded.repo, commentId);
    const pr = capturePullRequest(seeded);
    const work = fixScript("Made value.txt say fixed.\n\nSummary: Make value.txt say fixed");
    h.fake.push(
      ...work.slice(0, -1),
      {
        content: [toolUse("bash", { command: "echo broken > value.txt && echo oops > extra.txt" })],
      },
      {
        content: [
          toolUse("report_tests", { outcome: "failed", explanation: "test.sh wants fixed" }),
        ],
      },
      { content: [text("Put value.txt back as the issue had it.")] },
    );

    expect(await runQueued(run(job.id), h.deps())).toBe("succeeded");

    expect(sh(seeded.remote, `git show ${branch}:value.txt`)).toBe("fixed");
    expect(sh(seeded.remote, `git ls-tree --name-only ${branch}`)).toBe("test.sh\nvalue.txt");
    expect(pr.body).toContain("**Tests:** ✔ passed (`sh test.sh`)");
    expect(pr.body).toContain(
      "**Second look:**\n\nPut value.txt back as the issue had it.\n\nIts changes were undone: the tests no longer passed after its changes. The pull request has the work as it was before the second look.\n",
    );
  });

  it("is not taken with review.beforePullRequest: false", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded);
    mockStart(seeded, [], "review:\n  beforePullRequest: false\n");
    mockRequester();
    captureComment(seeded.repo, commentId);
    const pr = capturePullRequest(seeded);
    h.fake.push(...fixScript("Summary: Make value.txt say fixed").slice(0, -1));

    expect(await runQueued(run(job.id), h.deps())).toBe("succeeded");

    expect(h.fake.requests).toHaveLength(4);
    expect(pr.body).not.toContain("Second look");
    expect((await listJobEvents(h.db.pool, job.id)).map((e) => e.type)).not.toContain(
      "second_look",
    );
  });
});
