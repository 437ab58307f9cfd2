// Closing the server (SIGTERM) stops it taking connections but lets a webhook in flight finish.
import { once } from "node:events";
import { request } from "node:http";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { WEBHOOK_PATH } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { APP_SLUG, startTestServer } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/db.ts";
import { mockApp, useGitHubMock } from "../helpers/github-mock.ts";

useGitHubMock();

let db: Database;

beforeAll(async () => {
  db = await openTestDatabase();
});

afterAll(async () => {
  await db?.close();
});

it("a webhook request in flight when the server closes gets its answer", async () => {
  mockApp(APP_SLUG);
  const server = await startTestServer(db, { role: "web" });
  const body = JSON.stringify({ zen: "Keep it logically awesome." });
  const sent = request(`${server.url}${WEBHOOK_PATH}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "x-github-event": "ping",
      "x-github-delivery": "shutdown-1",
      "x-hub-signature-256": `sha256=${"0".repeat(64)}`,
      // The server answers "100 Continue" once it has the request: then it is in flight.
      expect: "100-continue",
    },
  });
  const answered = new Promise<number | undefined>((resolve, reject) => {
    sent.on("response", (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    sent.on("error", reject);
  });
  sent.flushHeaders();
  await once(sent, "continue");
  // Half the body: the handler waits for the rest.
  sent.write(body.slice(0, 10));

  const closing = server.close();
  await vi.waitFor(() => expect(fetch(`${server.url}/healthz`)).rejects.toThrow(), {
    interval: 20,
  });
  sent.end(body.slice(10));
  // A bad signature: the app answers it, rather than the connection being cut.
  expect(await answered).toBe(400);
  await closing;
});
