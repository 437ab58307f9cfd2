import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, readdir, readFile, readlink, rm, stat, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { type Database, openDatabase } from "../../src/store/database.ts";
import { loadMigrations, migrate } from "../../src/store/migrate.ts";
import { withTransaction } from "../../src/store/sql.ts";
import { connectAgain, databases, seedDataDir } from "../helpers/db.ts";
import { TYPESCRIPT_FLAGS } from "../helpers/typescript.ts";

describe("embedded database on disk", () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "vmpilot-db-"));
    // Created once already (the first test makes its own): the others reopen it.
    await seedDataDir(dataDir);
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it("creates a new database in a process of its own, so the serving one starts small", async () => {
    const fresh = await mkdtemp(join(tmpdir(), "vmpilot-db-new-"));
    onTestFinished(() => rm(fresh, { recursive: true, force: true }));
    const db = await openDatabase({ dataDir: fresh });
    onTestFinished(() => db.close());
    expect(existsSync(join(fresh, "pglite", "PG_VERSION"))).toBe(true);
    // Peak resident memory of the serving process: creating the database there (initdb) would
    // have left it near 600 MB.
    const status = readFileSync(`/proc/${db.embeddedPid}/status`, "utf8");
    const peakKb = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]);
    expect(peakKb).toBeGreaterThan(0);
    expect(peakKb / 1024).toBeLessThan(350);
  });

  it("keeps data under DATA_DIR across restarts and serves plain pg clients", async () => {
    const first = await openDatabase({ dataDir });
    expect(first.embedded).toBe(true);
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

  it("serves on a Unix socket only its user can reach, never on a TCP port", async () => {
    const db = await openDatabase({ dataDir });
    onTestFinished(() => db.close());
    expect(await listeningTcpPorts(db.embeddedPid as number)).toEqual([]);
    const socketDir = new URL(db.url).searchParams.get("host") as string;
    expect(socketDir).toBe(join(dataDir, "socket"));
    expect((await stat(socketDir)).mode & 0o777).toBe(0o700);
    expect((await stat(join(socketDir, ".s.PGSQL.5432"))).mode & 0o777).toBe(0o600);
  });

  it("refuses a second embedded database on the same files while the first runs", async () => {
    const first = await openDatabase({ dataDir });
    try {
      await expect(openDatabase({ dataDir })).rejects.toThrow(
        `in use by process ${first.embeddedPid}`,
      );
    } finally {
      await first.close();
    }
  });

  it("takes over the lock of a process that died", async () => {
    const child = spawn(process.execPath, ["-e", ""]);
    await once(child, "exit");
    await writeFile(join(dataDir, "pglite.lock"), String(child.pid));
    const db = await openDatabase({ dataDir });
    expect(await readFile(join(dataDir, "pglite.lock"), "utf8")).toBe(String(db.embeddedPid));
    await db.close();
  });

  it("closes the database cleanly when the process holding it is killed", async () => {
    const app = spawnDatabaseHolder(dataDir);
    onTestFinished(() => {
      app.kill("SIGKILL");
    });
    const lines = createInterface({ input: app.stdout as NodeJS.ReadableStream });
    const [line] = (await once(lines, "line")) as [string];
    const dbPid = Number(line);
    expect(await readFile(join(dataDir, "pglite.lock"), "utf8")).toBe(line);
    app.kill("SIGKILL");
    await once(app, "exit");

    await until(() => !isAlive(dbPid), "the database process to exit");
    // Gone by unlocking, not merely dead: a crash would have left its lock behind.
    expect(existsSync(join(dataDir, "pglite.lock"))).toBe(false);
    const db = await openDatabase({ dataDir });
    try {
      const { rows } = await db.pool.query("SELECT id FROM deliveries WHERE id = 'd-killed'");
      expect(rows).toEqual([{ id: "d-killed" }]);
    } finally {
      await db.close();
    }
  });
});

const src = (path: string) => fileURLToPath(new URL(`../../src/${path}`, import.meta.url));

/** A process that opens the embedded database, writes a row, prints the database's pid, hangs. */
function spawnDatabaseHolder(dataDir: string) {
  const code = `
    import { openDatabase } from ${JSON.stringify(src("store/database.ts"))};
    const db = await openDatabase({ dataDir: process.env.DATA_DIR });
    await db.pool.query("INSERT INTO deliveries (id, event) VALUES ('d-killed', 'issues')");
    console.log(db.embeddedPid);
    await new Promise(() => {});
  `;
  return spawn(process.execPath, [...TYPESCRIPT_FLAGS, "--input-type=module", "-e", code], {
    env: { ...process.env, DATA_DIR: dataDir },
    stdio: ["ignore", "pipe", "inherit"],
  });
}

/** The TCP ports process `pid` listens on, from its socket inodes and the kernel's tables. */
async function listeningTcpPorts(pid: number): Promise<number[]> {
  const inodes = new Set<string>();
  for (const fd of await readdir(`/proc/${pid}/fd`)) {
    const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(() => "");
    const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
    if (inode) inodes.add(inode);
  }
  const ports: number[] = [];
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const lines = (await readFile(table, "utf8").catch(() => "")).split("\n").slice(1);
    for (const line of lines) {
      const [, local, , state, , , , , , inode] = line.trim().split(/\s+/);
      if (state === "0A" && inode && inodes.has(inode)) {
        ports.push(Number.parseInt(local?.split(":")[1] ?? "", 16));
      }
    }
  }
  return ports;
}

/** Running, not exited: an orphan's exit leaves a zombie until its new parent reaps it. */
function isAlive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

async function until(condition: () => boolean, what: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

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
      expect([...a, ...b].sort((x, y) => x - y)).toEqual(all);
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

  it("keeps a query split across reads apart from other connections' queries", async () => {
    const raw = await rawSession(db.url);
    const other = new pg.Client({ connectionString: db.url });
    await other.connect();
    try {
      // Parse now, Bind later: another connection's query arrives in between.
      raw.send(
        message("P", cstring(""), cstring("SELECT 'raw-' || $1::text AS v"), int16(0)),
        message("H"),
      );
      await raw.until("1");
      const otherResult = other.query("SELECT $1::int + 1 AS w", [41]);
      // A window for the other query to reach the server; the assertions hold however it lands.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const value = Buffer.from("abc");
      raw.send(
        message(
          "B",
          cstring(""),
          cstring(""),
          int16(0),
          int16(1),
          int32(value.length),
          value,
          int16(0),
        ),
        message("E", cstring(""), int32(0)),
        message("S"),
      );
      const reply = await raw.until("Z");
      expect(reply.toString("latin1")).toContain("raw-abc");
      expect((await otherResult).rows).toEqual([{ w: 42 }]);
    } finally {
      raw.close();
      await other.end();
    }
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
  it("commits statements sent together, and rolls them all back when one fails", async () => {
    await db.pool.query("CREATE TABLE tx_pipelined (n int)");
    // Sent without waiting for each other: the pool pipelines them behind BEGIN.
    await withTransaction(db.pool, async (client, commit) => {
      await Promise.all([
        client.query("INSERT INTO tx_pipelined VALUES (1)"),
        client.query("INSERT INTO tx_pipelined VALUES (2)"),
        commit(),
      ]);
    });
    // COMMIT after a failed statement comes back as ROLLBACK, without an error of its own.
    const failed = withTransaction(db.pool, async (client, commit) => {
      const first = client.query("INSERT INTO tx_pipelined VALUES (3)");
      const bad = client.query("INSERT INTO tx_pipelined VALUES ('three')").catch(() => "failed");
      await first;
      expect(await bad).toBe("failed");
      await commit();
    });
    await expect(failed).rejects.toThrow("the transaction was rolled back");
    const { rows } = await db.pool.query("SELECT n FROM tx_pipelined ORDER BY n");
    expect(rows.map((r) => r.n)).toEqual([1, 2]);
  });
});

// Just enough of the wire protocol to send an extended query in two parts.
const cstring = (text: string) => Buffer.from(`${text}\0`);
const int16 = (n: number) => Buffer.from([n >> 8, n & 255]);
const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const message = (type: string, ...parts: Buffer[]) => {
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from(type), int32(body.length + 4), body]);
};

async function rawSession(url: string) {
  const { hostname, port, username, pathname, searchParams } = new URL(url);
  const socketDir = searchParams.get("host");
  const socket = socketDir
    ? connect(join(socketDir, ".s.PGSQL.5432"))
    : connect(Number(port), hostname);
  await once(socket, "connect");
  let received = Buffer.alloc(0);
  let waiting: (() => void) | undefined;
  socket.on("data", (data) => {
    received = Buffer.concat([received, data]);
    waiting?.();
  });
  // Resolves with everything received once a message of this type has arrived.
  const until = (type: string) =>
    new Promise<Buffer>((resolve) => {
      const check = () => {
        for (let at = 0; at + 5 <= received.length; at += 1 + received.readInt32BE(at + 1)) {
          if (String.fromCharCode(received[at] ?? 0) === type) {
            const all = received;
            received = Buffer.alloc(0);
            waiting = undefined;
            return resolve(all);
          }
        }
      };
      waiting = check;
      check();
    });
  const params = [
    cstring("user"),
    cstring(username || (searchParams.get("user") ?? "")),
    cstring("database"),
    cstring(pathname.slice(1)),
  ];
  const startup = Buffer.concat([int32(196608), ...params, Buffer.from([0])]);
  socket.write(Buffer.concat([int32(startup.length + 4), startup]));
  await until("Z");
  return {
    send: (...messages: Buffer[]) => socket.write(Buffer.concat(messages)),
    until,
    close: () => socket.destroy(),
  };
}
