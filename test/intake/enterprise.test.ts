// GitHub Enterprise: GHE_HOST / GHE_PROTOCOL move every API call to the Enterprise API base.
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { loadConfig } from "../../src/config/env.ts";
import type { RunningServer } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { getJob, listJobs } from "../../src/store/jobs.ts";
import { appPrivateKey, startTestServer, WEBHOOK_SECRET } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/db.ts";
import {
  github,
  mockApp,
  mockInstallationToken,
  mockPermission,
  mockRepoConfig,
  useGitHubMock,
} from "../helpers/github-mock.ts";
import { deliver, examplePayload } from "../helpers/webhooks.ts";

useGitHubMock();

const GHE = "https://ghe.example.com/api/v3";
let db: Database;
let server: RunningServer;

beforeAll(async () => {
  db = await openTestDatabase();
});

afterAll(async () => {
  await server?.close();
  await db?.close();
});

it("talks to the Enterprise API base for the slug, the token and the acknowledgement", async () => {
  const loaded = loadConfig({
    APP_ID: "7",
    PRIVATE_KEY: appPrivateKey(),
    WEBHOOK_SECRET,
    GHE_HOST: "ghe.example.com",
    HOST: "127.0.0.1",
    PORT: "0",
    LOG_LEVEL: "silent",
    INSTALLATION_SYNC_MINUTES: "0",
  });
  if (!("config" in loaded)) throw new Error(loaded.problems.join("\n"));
  expect(loaded.config.baseUrl).toBe(GHE);
  mockApp("ghe-pilot", GHE);
  server = await startTestServer(db, { config: loaded.config });
  expect(server.appSlug).toBe("ghe-pilot");

  mockInstallationToken(5, GHE);
  mockRepoConfig("Codertocat/Hello-World", undefined, GHE);
  mockPermission("Codertocat/Hello-World", "Codertocat", "write", GHE);
  github(GHE)
    .post("/repos/Codertocat/Hello-World/issues/comments/492700400/reactions")
    .reply(201, {});
  github(GHE).post("/repos/Codertocat/Hello-World/issues/1/comments").reply(201, { id: 9 });
  const payload = examplePayload("issue_comment", "created");
  payload.installation = { id: 5 };
  payload.comment.body = "@ghe-pilot fix the typo";
  const response = await deliver(server.url, {
    event: "issue_comment",
    payload,
    secret: WEBHOOK_SECRET,
  });
  expect(response.status).toBe(200);
  const [job] = await listJobs(db.pool, {});
  await vi.waitFor(
    async () => {
      if (!(await getJob(db.pool, job?.id as number))?.finishedAt) throw new Error("running");
    },
    { timeout: 15_000, interval: 25 },
  );
  expect((await getJob(db.pool, job?.id as number))?.status).toBe("acknowledged");
});
