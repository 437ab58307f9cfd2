// A job whose requester has spent their month (maxMonthlyCostUsdPerUser, the repository's cap over
// what they spent in every repository) stops before it starts, and its comment says why.
import { describe, expect, it } from "vitest";
import { updateJob } from "../../src/store/jobs.ts";
import { github } from "../helpers/github-mock.ts";
import { captureComment, run, runQueued, usePipelineHarness } from "./pipeline-harness.ts";

const h = usePipelineHarness();
const OCTOCAT = { requesterId: 583231 };

describe("the monthly budget per person", () => {
  it("refuses the requester's job once their month is spent elsewhere, saying so in its comment", async () => {
    const elsewhere = await h.seedRepo();
    const spent = await h.seedJob(elsewhere, {}, OCTOCAT);
    await updateJob(h.db.pool, spent.job.id, { costUsd: 10, status: "succeeded" });

    const seeded = await h.seedRepo();
    const { job, commentId } = await h.seedJob(seeded, {}, OCTOCAT);
    github()
      .get(`/repos/${seeded.repo}/contents/.github%2Fvmpilot.yml`)
      .reply(200, "maxMonthlyCostUsdPerUser: 10\n", {
        "content-type": "application/vnd.github.raw",
      });
    const bodies = captureComment(seeded.repo, commentId);

    expect(await runQueued(run(job.id), h.deps())).toBe("failed");
    expect(bodies.at(-1)).toMatchInlineSnapshot(`
      "⏹ **Limit reached** — [job #2](https://vmpilot.test/jobs/2)

      This job's requester reached the monthly cost limit per person ($10.00, maxMonthlyCostUsdPerUser), which counts their jobs and chat turns this month (UTC) in every repository vmpilot works on, with what running ones may still spend; it resets on the 1st, or a maintainer can raise maxMonthlyCostUsdPerUser.

      <!-- vmpilot:job:2 -->"
    `);
    const { rows } = await h.db.pool.query("SELECT reserved_usd FROM jobs WHERE id = $1", [job.id]);
    expect(Number(rows[0]?.reserved_usd)).toBe(0);
  });
});
