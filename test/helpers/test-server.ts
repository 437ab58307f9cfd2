// The real server on a fresh in-memory store for one test file: started before its tests (GitHub
// answers the GET /app at startup), closed after them. Use after useGitHubMock().
import { afterAll, beforeAll } from "vitest";
import type { RunningServer, StartOptions } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { APP_SLUG, startTestServer, WEBHOOK_SECRET } from "./app.ts";
import { openTestDatabase } from "./db.ts";
import { expectGitHubDone, mockApp } from "./github-mock.ts";
import { type Delivery, deliver } from "./webhooks.ts";

export interface TestServer {
  readonly db: Database;
  readonly server: RunningServer;
  /** POSTs a delivery signed with the test secret. */
  send(
    event: string,
    payload: unknown,
    extra?: Omit<Delivery, "event" | "payload" | "secret">,
  ): ReturnType<typeof deliver>;
}

export function useTestServer(options: Partial<Omit<StartOptions, "db">> = {}): TestServer {
  let db: Database | undefined;
  let server: RunningServer | undefined;
  beforeAll(async () => {
    db = await openTestDatabase();
    mockApp(APP_SLUG);
    server = await startTestServer(db, options);
    expectGitHubDone();
  });
  afterAll(async () => {
    await server?.close();
    await db?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("the test server is started in beforeAll");
    return value;
  };
  return {
    get db() {
      return started(db);
    },
    get server() {
      return started(server);
    },
    send: (event, payload, extra = {}) =>
      deliver(started(server).url, { event, payload, secret: WEBHOOK_SECRET, ...extra }),
  };
}
