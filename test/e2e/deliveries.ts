// What the in-process end-to-end suites share at the app's doors: a signed delivery and the one
// job it recorded, and the installation token the worker asks for before it acts.
import { expect } from "vitest";
import type { RunningServer } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { getJob, type Job } from "../../src/store/jobs.ts";
import { WEBHOOK_SECRET } from "../helpers/app.ts";
import { github } from "../helpers/github-mock.ts";
import { deliver, type Payload } from "../helpers/webhooks.ts";

/** Delivers `payload` signed, and returns the one job it recorded. */
export async function sendForJob(
  server: RunningServer,
  db: Database,
  event: string,
  payload: Payload,
): Promise<Job> {
  const response = await deliver(server.url, { event, payload, secret: WEBHOOK_SECRET });
  expect(response.status).toBe(200);
  const { rows } = await db.pool.query<{ id: string }>(
    "SELECT id FROM jobs WHERE delivery_id = $1",
    [response.id],
  );
  expect(rows).toHaveLength(1);
  return (await getJob(db.pool, Number(rows[0]?.id))) as Job;
}

/** The installation's token, once: the one the loopback git remote demands. */
export function mockToken(installation: number, token: string) {
  github()
    .post(`/app/installations/${installation}/access_tokens`)
    .reply(201, {
      token,
      expires_at: new Date(Date.now() + 3_600_000).toISOString(),
      permissions: { issues: "write", contents: "write", pull_requests: "write" },
      repository_selection: "all",
    });
}
