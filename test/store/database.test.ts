import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Database, openDatabase } from "../../src/store/database.ts";
import { loadMigrations, migrate } from "../../src/store/migrate.ts";
import { withTransaction } from "../../src/store/sql.ts";
import { connectAgain, databases } from "../helpers/db.ts";

describe("embedded database on disk", () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "vmpilot-db-"));
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it("keeps data under DATA_DIR across restarts and serves plain pg clients", async () => {
    const first = await openDatabase({ dataDir });
    expect(first.embedded).toBe(true);
    expect(first.url).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres$/);
    const client = new pg.Client({ connectionString: first.url });
    await client.connect();
    await client.query("INSERT INTO deliveries (id, event) VALUES ('d-1', 'issues')");
    await client.end();
    await first.close();

    const second = await openDatabase({ dataDir });
    const { rows } = await second.pool.query("SELECT id FROM deliveries");
    expect(rows).toEqual([{ id: "d-1" }]);
    const { rows: versions } = await second.pool.query("SELECT version FROM schema_migrations");
    expect(versions.length).toBe((await loadMigrations()).length);
    await second.close();
  });

  it("refuses a second embedded database on the same files while the first runs", async () => {
    const first = await openDatabase({ dataDir });
    try {
      await expect(openDatabase({ dataDir })).rejects.toThrow(/in use by process \d+/);
    } finally {
      await first.close();
    }
  });

  it("takes over the lock of a process that died", async () => {
    const child = spawn(process.execPath, ["-e", ""]);
    await once(child, "exit");
    await writeFile(join(dataDir, "pglite.lock"), String(child.pid));
    const db = await openDatabase({ dataDir });
    expect(await readFile(join(dataDir, "pglite.lock"), "utf8")).toBe(String(process.pid));
    await db.close();
  });
});

describe.each(databases())("database on $name", (target) => {
  let db: Database;
  beforeAll(async () => {
    db = await target.open({ migrate: false });
  });
  afterAll(async () => {
    await db.close();
  });

  it("applies each migration once when two processes migrate together", async () => {
    const other = await connectAgain(db);
    try {
      const [a, b] = await Promise.all([migrate(db.pool), migrate(other.pool)]);
      const all = (await loadMigrations()).map((m) => m.version);
      expect([...a, ...b].sort()).toEqual(all);
      const { rows } = await db.pool.query("SELECT version FROM schema_migrations ORDER BY 1");
      expect(rows.map((r) => r.version)).toEqual(all);
      expect(await migrate(other.pool)).toEqual([]);
    } finally {
      await other.close();
    }
  });

  it("runs concurrent queries from many clients", async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        db.pool.query<{ v: number; s: string }>("SELECT $1::int AS v, $2::text AS s", [i, `n${i}`]),
      ),
    );
    expect(results.map((r) => r.rows[0])).toEqual(
      Array.from({ length: 50 }, (_, i) => ({ v: i, s: `n${i}` })),
    );
  });

  it("isolates a transaction from a client querying meanwhile", async () => {
    await db.pool.query("CREATE TABLE tx_probe (n int)");
    let seenDuring: Promise<number> | undefined;
    await withTransaction(db.pool, async (client) => {
      await client.query("INSERT INTO tx_probe VALUES (1)");
      seenDuring = db.pool
        .query<{ n: number }>("SELECT count(*)::int AS n FROM tx_probe")
        .then((r) => r.rows[0]?.n ?? -1);
      await client.query("INSERT INTO tx_probe VALUES (2)");
    });
    // Never a half-done transaction: 0 before commit on PostgreSQL, 2 after it on PGlite.
    expect([0, 2]).toContain(await seenDuring);

    await expect(
      withTransaction(db.pool, async (client) => {
        await client.query("INSERT INTO tx_probe VALUES (3)");
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    const { rows } = await db.pool.query("SELECT n FROM tx_probe ORDER BY n");
    expect(rows.map((r) => r.n)).toEqual([1, 2]);
  });
});
