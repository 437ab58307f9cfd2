// The worker dies between enqueue and acknowledgement; the next worker acknowledges exactly once.
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { getJob, type Job, listJobs } from "../../src/store/jobs.ts";
import { APP_SLUG, startTestServer, WEBHOOK_SECRET } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/db.ts";
import {
  expectGitHubDone,
  github,
  mockApp,
  mockInstallationToken,
  mockPermission,
  mockRepoConfig,
  useGitHubMock,
} from "../helpers/github-mock.ts";
import { deliver, examplePayload } from "../helpers/webhooks.ts";

useGitHubMock();

const REPO = "Codertocat/Hello-World";
let db: Database;
const servers: RunningServer[] = [];

beforeAll(async () => {
  db = await openTestDatabase();
});

afterAll(async () => {
  for (const server of servers) await server.close();
  await db?.close();
});

it("acknowledges a job left queued by a dead worker exactly once after restart", async () => {
  // First process: receives the webhook, but its worker is gone before the job runs.
  mockApp(APP_SLUG);
  const web = await startTestServer(db, { role: "web" });
  servers.push(web);
  const payload = examplePayload("issues", "labeled");
  payload.label.name = "vmpilot";
  payload.installation = { id: 31 };
  const response = await deliver(web.url, { event: "issues", payload, secret: WEBHOOK_SECRET });
  expect(response.status).toBe(200);
  await web.close();
  const [queued] = await listJobs(db.pool, {});
  expect(queued).toMatchObject({ status: "queued", startedAt: null, progressCommentId: null });
  expectGitHubDone();

  // The restarted worker: one token, one permission check, one reaction, one comment.
  mockInstallationToken(31);
  mockRepoConfig(REPO);
  mockPermission(REPO, "Codertocat", "admin");
  const reaction = github()
    .post(`/repos/${REPO}/issues/1/reactions`, { content: "eyes" })
    .once()
    .reply(201, { id: 1, content: "eyes" });
  const comment = github().post(`/repos/${REPO}/issues/1/comments`).once().reply(201, { id: 4242 });
  const worker = await startTestServer(db, { role: "worker" });
  servers.push(worker);
  const done = await vi.waitFor(
    async () => {
      const job = (await getJob(db.pool, queued?.id as number)) as Job;
      if (!job.finishedAt) throw new Error(`still ${job.status}`);
      return job;
    },
    { timeout: 15_000, interval: 25 },
  );
  expect(done).toMatchObject({ status: "acknowledged", progressCommentId: 4242, attempts: 1 });
  expect(reaction.isDone() && comment.isDone()).toBe(true);
  await worker.close();
  expectGitHubDone();
});
