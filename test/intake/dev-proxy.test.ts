// `npm run dev` with WEBHOOK_PROXY_URL: webhooks arrive through a smee channel (here a loopback
// server speaking smee's event-stream format) and are forwarded to the webhook endpoint.
import { randomUUID } from "node:crypto";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, expect, it, vi } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { listJobs } from "../../src/store/jobs.ts";
import { APP_SLUG, startTestServer, testConfig, WEBHOOK_SECRET } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/db.ts";
import { mockApp, useGitHubMock } from "../helpers/github-mock.ts";
import { examplePayload, signature } from "../helpers/webhooks.ts";

useGitHubMock();

let db: Database | undefined;
let server: RunningServer | undefined;
const channel = createServer();

afterAll(async () => {
  await server?.close();
  await db?.close();
  channel.closeAllConnections();
  channel.close();
});

it("forwards deliveries from the WEBHOOK_PROXY_URL channel to the webhook endpoint", async () => {
  const connected = new Promise<ServerResponse>((resolve) => {
    channel.on("request", (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.write(": connected\n\n");
      resolve(res);
    });
  });
  await new Promise<void>((done) => channel.listen(0, "127.0.0.1", done));
  const source = `http://127.0.0.1:${(channel.address() as AddressInfo).port}/channel`;
  db = await openTestDatabase();
  mockApp(APP_SLUG);
  server = await startTestServer(db, {
    role: "web",
    config: testConfig({ webhookProxyUrl: source }),
  });

  const payload = examplePayload("issue_comment", "created");
  payload.installation = { id: 8 };
  payload.comment.body = "/vmpilot fix through the proxy";
  const id = randomUUID();
  const event = {
    "x-github-event": "issue_comment",
    "x-github-delivery": id,
    "x-hub-signature-256": signature(JSON.stringify(payload), WEBHOOK_SECRET),
    body: payload,
  };
  (await connected).write(`data: ${JSON.stringify(event)}\n\n`);
  const [job] = await vi.waitFor(
    async () => {
      const jobs = await listJobs((db as Database).pool, {});
      if (jobs.length === 0) throw new Error("not forwarded yet");
      return jobs;
    },
    { timeout: 10_000, interval: 25 },
  );
  expect(job).toMatchObject({ deliveryId: id, instruction: "through the proxy" });
});
