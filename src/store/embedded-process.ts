// The embedded database's own process, forked by startEmbeddedPostgres (embedded.ts). PGlite runs
// queries on its process's main thread and its WASM memory swells that process, so it stays out of
// the app's. Imports only what serving PGlite needs, to start quickly.
import { chmod, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import { DataDirBusyError, lockDataDir } from "./data-dir-lock.ts";
import type { EmbeddedReport } from "./embedded.ts";
import { serializeSessions } from "./pglite-sessions.ts";

// pg pools for the app and pg-boss, per process, plus a second process in tests; the socket server
// queues queries from all of them onto PGlite's single backend.
const MAX_CONNECTIONS = 128;

// The name libpq and pg look for in a `host=/dir` connection (port 5432).
const SOCKET_NAME = ".s.PGSQL.5432";
// Unix socket paths are cut off at 108 bytes.
const MAX_SOCKET_PATH = 100;

/**
 * pglite-socket checks no password, so the server listens on a Unix socket in a directory only
 * this user may enter, never on a TCP port anything on the machine (a sandboxed command given
 * 127.0.0.1, another user) could reach. The directory is under DATA_DIR, which sandboxes never
 * see; in memory, or when DATA_DIR is too deep for a socket path, a private temporary one.
 */
async function socketDir(dataDir: string): Promise<string> {
  const dir = resolve(dataDir, "socket");
  if (dataDir === "memory://" || Buffer.byteLength(join(dir, SOCKET_NAME)) > MAX_SOCKET_PATH) {
    return mkdtemp(join(tmpdir(), "vmpilot-db-"));
  }
  // The data dir lock is held: a socket left here by a dead server is stale.
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { mode: 0o700 });
  return dir;
}

async function open(dataDir: string) {
  let pgliteDir: string | undefined;
  let unlock = async () => {};
  if (dataDir !== "memory://") {
    pgliteDir = join(dataDir, "pglite");
    await mkdir(pgliteDir, { recursive: true });
    unlock = await lockDataDir(dataDir);
  }
  let pglite: PGlite;
  try {
    pglite = await PGlite.create(pgliteDir, {
      // Postgres touches all its shared buffers at start, in PGlite's WASM memory: the default
      // 128 MB would all be resident. The app's tables are small and the OS caches their files.
      startParams: [...PGlite.defaultStartParams, "-c", "shared_buffers=32MB"],
    });
  } catch (error) {
    await unlock();
    throw error;
  }
  let served: Awaited<ReturnType<typeof serve>>;
  try {
    served = await serve(pglite, dataDir);
  } catch (error) {
    await pglite.close();
    await unlock();
    throw error;
  }
  return {
    url: served.url,
    async stop() {
      await served.stop();
      await pglite.close();
      await unlock();
    },
  };
}

async function serve(pglite: PGlite, dataDir: string) {
  const dir = await socketDir(dataDir);
  const path = join(dir, SOCKET_NAME);
  const server = new PGLiteSocketServer({
    db: serializeSessions(pglite),
    path,
    maxConnections: MAX_CONNECTIONS,
  });
  const stop = async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await server.start();
    await chmod(path, 0o600);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `postgres:///postgres?host=${encodeURIComponent(dir)}&user=postgres`, stop };
}

const dataDir = process.argv[2];
if (!process.send || dataDir === undefined) {
  throw new Error("embedded-process.ts is started by startEmbeddedPostgres, with an IPC channel");
}

// The app decides when the database stops: on Ctrl-C or a service manager's SIGTERM it still
// finishes its jobs, with queries, before it asks for the stop or exits (which disconnects us).
process.on("SIGINT", () => {});
process.on("SIGTERM", () => {});

function failure(error: Error): EmbeddedReport {
  return error instanceof DataDirBusyError
    ? { error: error.message, busyHolder: error.holder }
    : { error: error.message };
}

function report(message: EmbeddedReport, then: () => void = () => {}) {
  if (process.connected) process.send?.(message, then);
  else then();
}

const opening = open(dataDir);
if (process.argv[3] === "--create") {
  // Only to create the database files; the parent then starts the serving process.
  opening
    .then((db) => db.stop())
    .then(
      () => report({ url: "" }, () => process.exit(0)),
      (error: Error) => report(failure(error), () => process.exit(1)),
    );
} else {
  opening.then(
    (db) => report({ url: db.url }),
    (error: Error) => report(failure(error), () => process.exit(1)),
  );
}

let closing = false;
function close() {
  if (closing) return;
  closing = true;
  opening
    .then((db) => db.stop())
    .then(
      () => process.exit(0),
      (error: Error) => {
        console.error(`vmpilot: embedded database: ${error.message}`);
        process.exit(1);
      },
    );
}
process.on("message", (message) => {
  if (message === "stop") close();
});
// The app exited, however it died: close the files and release the lock for the next start.
process.on("disconnect", close);
