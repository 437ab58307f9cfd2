// GET /metrics through the real server: the token gate, the per-process counters fed by signed
// webhooks, and the store's gauges read at scrape time.
import nock from "nock";
import { ProbotOctokit } from "probot";
import { describe, expect, it } from "vitest";
import { watchRateLimit } from "../../src/github/rate-limit.ts";
import { updateJob } from "../../src/store/jobs.ts";
import { APP_SLUG, startTestServer, testConfig } from "../helpers/app.ts";
import { openTestDatabase, seedConversation, seedJob } from "../helpers/db.ts";
import { github, mockApp, useGitHubMock } from "../helpers/github-mock.ts";
import { useTestServer } from "../helpers/test-server.ts";
import { examplePayload } from "../helpers/webhooks.ts";

useGitHubMock();

const TOKEN = "metrics-token-0123456789";
const t = useTestServer({ role: "web", config: testConfig({ metricsToken: TOKEN }) });

async function scrape(authorization?: string): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = authorization ? { authorization } : {};
  const res = await fetch(`${t.server.url}/metrics`, { headers });
  return { status: res.status, text: await res.text() };
}

/** The value of one sample line, `name{labels} value`; 0 when absent. */
function sample(text: string, line: string): number {
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found ? Number(found.slice(line.length + 1)) : 0;
}

describe("GET /metrics", () => {
  it("is not served at all without METRICS_TOKEN", async () => {
    const other = await openTestDatabase();
    mockApp(APP_SLUG);
    const plain = await startTestServer(other, { role: "web" });
    try {
      const res = await fetch(`${plain.url}/metrics`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(res.status).toBe(404);
      await res.text();
    } finally {
      await plain.close();
      await other.close();
    }
  });

  it("refuses a missing or wrong bearer token", async () => {
    expect((await scrape()).status).toBe(401);
    expect((await scrape(`Bearer ${TOKEN}x`)).status).toBe(401);
    expect((await scrape(TOKEN)).status).toBe(401);
  });

  it("counts signed webhook deliveries by event and outcome", async () => {
    const line = 'vmpilot_webhook_deliveries_total{event="issue_comment",outcome="job"}';
    const before = sample((await scrape(`Bearer ${TOKEN}`)).text, line);
    const payload = examplePayload("issue_comment", "created");
    payload.comment.body = "/vmpilot fix the date parser";
    payload.comment.id = 987_654;
    payload.installation = { id: 4242 };
    const sent = await t.send("issue_comment", payload);
    expect(sent.status).toBe(200);
    const after = await scrape(`Bearer ${TOKEN}`);
    expect(after.status).toBe(200);
    expect(sample(after.text, line)).toBe(before + 1);
  });

  it("reads jobs by state and the queue's depth and age from the store", async () => {
    const { text: before } = await scrape(`Bearer ${TOKEN}`);
    const { conversation } = await seedConversation(t.db, 5150);
    await seedJob(t.db, conversation);
    const running = await seedJob(t.db, conversation);
    await updateJob(t.db.pool, running.id, { status: "running" });
    const { text } = await scrape(`Bearer ${TOKEN}`);
    const queued = 'vmpilot_jobs{state="queued"}';
    expect(sample(text, queued)).toBe(sample(before, queued) + 1);
    const runningLine = 'vmpilot_jobs{state="running"}';
    expect(sample(text, runningLine)).toBe(sample(before, runningLine) + 1);
    expect(sample(text, "vmpilot_queue_depth")).toBe(sample(before, "vmpilot_queue_depth") + 1);
    expect(text).toMatch(/^vmpilot_queue_oldest_age_seconds \d/m);
    expect(text).toContain("# TYPE vmpilot_job_duration_seconds histogram");
    expect(text).toContain("# TYPE vmpilot_model_tokens_total counter");
    expect(text).toContain("# TYPE vmpilot_workspace_errors_total counter");
    expect(text).toContain("vmpilot_process_resident_memory_bytes");
  });

  it("shows GitHub's rate limit as its last response said", async () => {
    const octokit = new ProbotOctokit({ auth: { token: "ghs_test" }, retry: { enabled: false } });
    watchRateLimit(octokit, "31337");
    github().get("/rate_limit").reply(200, {}, { "x-ratelimit-remaining": "4321" });
    await octokit.request("GET /rate_limit");
    // An error response counts too (a 403 would be the throttling plugin's to retry).
    github()
      .get("/rate_limit")
      .reply(404, { message: "Not Found" }, { "x-ratelimit-remaining": "12" });
    await expect(octokit.request("GET /rate_limit")).rejects.toMatchObject({ status: 404 });
    const { text } = await scrape(`Bearer ${TOKEN}`);
    expect(sample(text, 'vmpilot_github_rate_limit_remaining{installation="31337"}')).toBe(12);
    expect(nock.isDone()).toBe(true);
  });
});
