// An attempt redone after its agent finished (GitHub refused the pull request, the push failed)
// delivers the run the first attempt kept: the model is paid once, through the real pipeline
// (sandbox, git, PGlite) with GitHub and the model faked at their HTTP edges.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { formatCost } from "../../src/github/progress-comment.ts";
import { listJobEvents } from "../../src/store/job-events.ts";
import { getJob } from "../../src/store/jobs.ts";
import { getKeptRun } from "../../src/store/kept-runs.ts";
import { github } from "../helpers/github-mock.ts";
import {
  captureComment,
  fixScript,
  mockRequester,
  mockStart,
  run,
  runQueued,
  type Seeded,
  sh,
  usePipelineHarness,
} from "./pipeline-harness.ts";

const h = usePipelineHarness();
const branch = "vmpilot/issue-4-crash-on-empty-input";
const SUMMARY = "Changed value.txt to fixed.\n\nSummary: Make value.txt say fixed";

/** The pull request's creation, answered with `status`; resolves the body it was sent. */
function mockPullRequest(seeded: Seeded, status: 201 | 403): { body: string } {
  const sent = { body: "" };
  github()
    .get(`/repos/${seeded.repo}/pulls`)
    .query(true)
    .reply(200, [])
    .post(`/repos/${seeded.repo}/pulls`, (body) => {
      sent.body = body.body;
      return true;
    })
    .reply(
      status,
      status === 201
        ? { number: 12, html_url: `https://github.com/${seeded.repo}/pull/12` }
        : { message: "Resource not accessible by integration" },
    );
  return sent;
}

/** The job's log: how many runs of the model ended, and the kept run's notes. */
async function runsLogged(jobId: number) {
  const events = await listJobEvents(h.db.pool, jobId);
  return {
    finished: events.filter((e) => e.type === "finished").length,
    steps: events.filter((e) => e.type === "step_started").length,
    kept: events.filter((e) => e.type === "kept_run").map((e) => e.data.message),
  };
}

describe("an attempt redone after the agent finished", () => {
  it("opens the pull request GitHub refused the first time from the branch as pushed, without paying the model again", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded);
    mockStart(seeded);
    mockRequester();
    const comment = captureComment(seeded.repo, commentId);
    // A plain 403 (no rate limit in it) is not retried in place: the attempt fails.
    mockPullRequest(seeded, 403);
    h.fake.push(...fixScript(SUMMARY));

    await expect(runQueued(run(job.id, 1), h.deps())).rejects.toMatchObject({ status: 403 });
    expect(comment.at(-1)).toContain("Retrying");
    const pushed = sh(seeded.remote, `git rev-parse ${branch}`);
    const first = await getJob(h.db.pool, job.id);
    expect(first?.costUsd).toBeGreaterThan(0);
    // The run and its second look.
    const logged = await runsLogged(job.id);
    expect(logged).toMatchObject({ finished: 2, kept: [] });
    expect(h.fake.requests).toHaveLength(5);

    mockStart(seeded);
    mockRequester();
    const pr = mockPullRequest(seeded, 201);
    expect(await runQueued(run(job.id, 2), h.deps())).toBe("succeeded");

    // The model got its requests once across both attempts; the branch was used as it was.
    expect(h.fake.requests).toHaveLength(5);
    expect(sh(seeded.remote, `git rev-parse ${branch}`)).toBe(pushed);
    expect(pr.body).toContain("Changed value.txt to fixed.");
    expect(pr.body).toContain("Fixes #4");
    expect(pr.body).toContain("- `M` value.txt");
    expect(pr.body).toContain("**Second look:** Nothing found.");
    // The kept run's turns (its second look's among them), and the job's cost: the first attempt's, counted once.
    const cost = ` · ${formatCost(first?.costUsd ?? 0)} · `;
    const runLine = (text: string, start: string) =>
      text.split("\n").find((line) => line.startsWith(start));
    expect(runLine(pr.body, "**Run:** ")).toMatch(/^\*\*Run:\*\* `claude-sonnet-5-5` · 5 steps · /);
    expect(runLine(pr.body, "**Run:** ")).toContain(cost);
    const final = comment.at(-1) ?? "";
    expect(final).toContain("✅ **Opened draft pull request #12**");
    expect(final).toContain("Changed value.txt to fixed.");
    expect(final).toContain("- Tests: ✔ passed");
    expect(runLine(final, "- Run: ")).toContain(cost);
    const done = await getJob(h.db.pool, job.id);
    expect(done).toMatchObject({ status: "succeeded", prNumber: 12, costUsd: first?.costUsd });
    expect(done?.usage).toEqual(first?.usage);
    // The second attempt ran no agent: no step, no end of a run, and the kept run said so.
    expect(await runsLogged(job.id)).toEqual({
      finished: 2,
      steps: logged.steps,
      kept: [
        "The agent's run of attempt 1 was kept: the branch holds its work already, and the model is not run again.",
      ],
    });
    // A finished job keeps no run.
    expect(await getKeptRun(h.db.pool, job.id)).toBeUndefined();
  });

  it("pushes the kept work after a push that failed, on the commit it began from though the default branch moved on", async () => {
    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded);
    const base = sh(seeded.remote, "git rev-parse main");
    // The remote refuses the first push it is sent (a hook that removes itself).
    sh(
      seeded.remote,
      `printf '#!/bin/sh\\nrm -f "$0"\\necho "the remote is busy" >&2\\nexit 1\\n' > hooks/pre-receive && chmod +x hooks/pre-receive`,
    );
    mockStart(seeded);
    mockRequester();
    const comment = captureComment(seeded.repo, commentId);
    h.fake.push(...fixScript(SUMMARY));

    await expect(runQueued(run(job.id, 1), h.deps())).rejects.toThrow(/the remote is busy/);
    expect(sh(seeded.remote, "git for-each-ref --format='%(refname)' refs/heads")).toBe(
      "refs/heads/main",
    );
    const first = await getJob(h.db.pool, job.id);
    expect(await getKeptRun(h.db.pool, job.id)).toMatchObject({ attempt: 1, baseSha: base });

    // Someone pushes to main before the job's next attempt.
    const work = join(h.dataDir, "..", `work-${seeded.name}`);
    sh(join(h.dataDir, ".."), `git clone -q ${seeded.remote} ${work}`);
    sh(work, "echo more > other.txt && git add -A && git commit -qm other && git push -q");
    mockStart(seeded);
    mockRequester();
    const pr = mockPullRequest(seeded, 201);
    expect(await runQueued(run(job.id, 2), h.deps())).toBe("succeeded");

    expect(h.fake.requests).toHaveLength(5);
    expect(sh(seeded.remote, `git show ${branch}:value.txt`)).toBe("fixed");
    expect(sh(seeded.remote, `git rev-parse ${branch}^`)).toBe(base);
    expect(sh(seeded.remote, `git log -1 --format='%an|%B' ${branch}`)).toBe(
      "vmpilot-bot[bot]|Make value.txt say fixed\n\nCo-authored-by: octocat <583231+octocat@users.noreply.github.com>",
    );
    expect(pr.body).toContain("Changed value.txt to fixed.");
    expect(pr.body).toContain("- `M` value.txt");
    expect(pr.body).not.toContain("other.txt");
    expect(comment.at(-1)).toContain("✅ **Opened draft pull request #12**");
    expect(await getJob(h.db.pool, job.id)).toMatchObject({
      status: "succeeded",
      costUsd: first?.costUsd,
    });
    expect((await runsLogged(job.id)).kept).toEqual([
      "The agent's run of attempt 1 was kept: its work is restored, and the model is not run again.",
    ]);
  });
});
