// The reconciliation of the installations and repositories tables with GitHub, against the GitHub
// fake (two pages of installations and of repositories) and the store on each database.
import { Probot } from "probot";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createQueue } from "../../src/jobs/queue/queue.ts";
import { createLogger } from "../../src/log/logger.ts";
import {
  type InstallationSyncDeps,
  startInstallationSync,
  syncInstallations,
} from "../../src/roles/installation-sync.ts";
import type { Database } from "../../src/store/database.ts";
import {
  databaseTime,
  getRepository,
  listActiveRepositories,
  reconcileInstallation,
  setRepositorySettings,
  upsertInstallation,
  upsertRepository,
} from "../../src/store/installations.ts";
import {
  type FakeCall,
  type FakeInstallation,
  type GitHubFake,
  startGitHubFake,
} from "../e2e/github-fake.ts";
import { appPrivateKey } from "../helpers/app.ts";
import { connectAgain, databases } from "../helpers/db.ts";

const logger = createLogger({ level: "silent", format: "json" });
const TOKEN = `ghs_${"x".repeat(36)}`;

function syncDeps(db: Database, gh: GitHubFake): InstallationSyncDeps {
  const probot = new Probot({
    appId: 12345,
    privateKey: appPrivateKey(),
    baseUrl: gh.url,
    log: logger,
  });
  return { pool: db.pool, app: () => probot.auth(), auth: (id) => probot.auth(id), logger };
}

async function activeNames(db: Database): Promise<string[]> {
  return (await listActiveRepositories(db.pool)).map((r) => r.fullName);
}

async function deletedInstallations(db: Database): Promise<number[]> {
  const { rows } = await db.pool.query<{ id: string }>(
    "SELECT id FROM installations WHERE deleted_at IS NOT NULL ORDER BY id",
  );
  return rows.map((row) => Number(row.id));
}

/**
 * Dates every row written so far a second back: PGlite's clock counts whole milliseconds, and a
 * row written in the same millisecond as the sync's reading of the time counts as written after
 * GitHub was read (updated_at >= since), so the sync rightly leaves it alone.
 */
async function writtenBefore(db: Database): Promise<void> {
  for (const table of ["installations", "repositories"]) {
    await db.pool.query(`UPDATE ${table} SET updated_at = updated_at - interval '1 second'`);
  }
}

describe.each(databases())("the installation sync on $name", (target) => {
  let db: Database;
  let gh: GitHubFake | undefined;
  let installations: FakeInstallation[];

  beforeAll(async () => {
    db = await target.open();
  });
  afterEach(async () => {
    expect(gh?.problems ?? []).toEqual([]);
    await gh?.close();
    gh = undefined;
  });
  afterAll(async () => {
    await db.close();
  });

  /** Three installations, the first with three repositories: two pages of each. */
  async function startFake(before?: (call: FakeCall) => Promise<void>): Promise<GitHubFake> {
    installations = [
      {
        id: 1,
        account: "acme",
        token: `ghs_${"a".repeat(36)}`,
        repositories: [
          { id: 11, fullName: "acme/api" },
          { id: 12, fullName: "acme/web" },
          { id: 13, fullName: "acme/docs" },
        ],
      },
      { id: 2, account: "beta", token: `ghs_${"b".repeat(36)}`, repositories: [] },
      {
        id: 3,
        account: "gamma",
        token: `ghs_${"c".repeat(36)}`,
        repositories: [{ id: 31, fullName: "gamma/tool" }],
      },
    ];
    gh = await startGitHubFake({ token: TOKEN, installations, pageSize: 2, before });
    return gh;
  }

  it("adds what GitHub lists, marks removed what it no longer lists, and keeps the settings", async () => {
    const fake = await startFake();
    // What the store knew: a repository GitHub no longer lists, one it lists again, and a
    // repository of an installation that is gone.
    await upsertInstallation(db.pool, { id: 1, accountLogin: "acme" });
    await upsertRepository(db.pool, { id: 10, installationId: 1, fullName: "acme/old" });
    await setRepositorySettings(db.pool, 10, { maxSteps: 7 });
    await upsertRepository(db.pool, {
      id: 12,
      installationId: 1,
      fullName: "acme/web",
      removed: true,
    });
    await setRepositorySettings(db.pool, 12, { label: "ai" });
    await upsertRepository(db.pool, { id: 91, installationId: 9, fullName: "gone/repo" });
    await writtenBefore(db);

    expect(await syncInstallations(syncDeps(db, fake))).toBe(9);
    expect(await activeNames(db)).toEqual(["acme/api", "acme/docs", "acme/web", "gamma/tool"]);
    expect(await getRepository(db.pool, 10)).toMatchObject({
      removedAt: expect.any(Date),
      settings: { maxSteps: 7 },
    });
    expect((await getRepository(db.pool, 12))?.settings).toEqual({ label: "ai" });
    expect(await deletedInstallations(db)).toEqual([9]);
    const secondPages = fake.calls.filter((c) => c.query.get("page") === "2").map((c) => c.path);
    expect(secondPages).toEqual(["/app/installations", "/installation/repositories"]);

    // GitHub stops listing a repository: the next run marks it removed and changes nothing else.
    installations[0]?.repositories.pop();
    await writtenBefore(db);
    expect(await syncInstallations(syncDeps(db, fake))).toBe(1);
    expect(await activeNames(db)).toEqual(["acme/api", "acme/web", "gamma/tool"]);
  });

  it("leaves a repository a webhook wrote after GitHub was read", async () => {
    await upsertInstallation(db.pool, { id: 4, accountLogin: "delta" });
    await writtenBefore(db);
    const since = await databaseTime(db.pool);
    await upsertRepository(db.pool, { id: 41, installationId: 4, fullName: "delta/new" });
    const listed = { id: 4, accountLogin: "delta", accountType: "Organization", suspended: false };
    expect(await reconcileInstallation(db.pool, since, listed, [])).toBe(1);
    expect((await getRepository(db.pool, 41))?.removedAt).toBeNull();
  });

  it("runs once when two processes start it at once", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    // GitHub answers only once both processes have asked for a run.
    const fake = await startFake((call) =>
      call.path === "/app/installations" ? held : Promise.resolve(),
    );
    const other = await connectAgain(db);
    const one = createQueue(db, { logger });
    const two = createQueue(other, { logger });
    const queues = [one, two];
    const runs = async () => {
      const { rows } = await db.pool.query<{ state: string }>(
        "SELECT state FROM pgboss.job WHERE name = 'vmpilot-installation-sync'",
      );
      return rows.map((row) => row.state);
    };
    try {
      await Promise.all(queues.map((queue) => queue.start()));
      const stops = await Promise.all([
        startInstallationSync(one, 15, syncDeps(db, fake)),
        startInstallationSync(two, 15, syncDeps(other, fake)),
      ]);
      release();
      await vi.waitFor(async () => expect(await runs()).toEqual(["completed"]), {
        timeout: 20_000,
        interval: 50,
      });
      for (const stop of stops) stop();
    } finally {
      await Promise.all(queues.map((queue) => queue.stop()));
      await other.close();
    }
    const listings = fake.calls.filter(
      (c) => c.path === "/app/installations" && !c.query.has("page"),
    );
    expect(listings).toHaveLength(1);
    expect(await runs()).toEqual(["completed"]);
  });
});
