import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { PGLiteSocketServer } from "@electric-sql/pglite-socket";
import { lockDataDir } from "./data-dir-lock.ts";
import { serializeSessions } from "./pglite-sessions.ts";

// pg pools for the app and pg-boss, per process, plus a second process in tests; the socket server
// queues queries from all of them onto PGlite's single backend.
const MAX_CONNECTIONS = 128;

export interface EmbeddedPostgres {
  url: string;
  stop(): Promise<void>;
}

/**
 * Starts PGlite (file-backed under dataDir/pglite, or in memory when dataDir is "memory://") and
 * serves it on a free loopback port, so the rest of the code talks to it with plain `pg`.
 */
export async function startEmbeddedPostgres(dataDir: string): Promise<EmbeddedPostgres> {
  let pgliteDir: string | undefined;
  let unlock = async () => {};
  if (dataDir !== "memory://") {
    pgliteDir = join(dataDir, "pglite");
    await mkdir(pgliteDir, { recursive: true });
    unlock = await lockDataDir(dataDir);
  }
  let pglite: PGlite;
  try {
    pglite = await PGlite.create(pgliteDir);
  } catch (error) {
    await unlock();
    throw error;
  }
  const server = new PGLiteSocketServer({
    db: serializeSessions(pglite),
    host: "127.0.0.1",
    port: 0,
    maxConnections: MAX_CONNECTIONS,
  });
  try {
    await server.start();
  } catch (error) {
    await pglite.close();
    await unlock();
    throw error;
  }
  return {
    url: `postgres://postgres@${server.getServerConn()}/postgres`,
    async stop() {
      await server.stop();
      await pglite.close();
      await unlock();
    },
  };
}
