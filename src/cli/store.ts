// The CLI's conversations live in the app's store: DATABASE_URL when set, else the embedded
// database under the user's data dir. The CLI opens it only to read and to write a turn, never
// for a whole run: the embedded database serves one process, and a second `vmpilot run` on
// another repository should wait a second, not for the first run to end.
import { homedir } from "node:os";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { DataDirBusyError } from "../store/data-dir-lock.ts";
import { type Database, openDatabase } from "../store/database.ts";
import { UsageError } from "./args.ts";

/** `DATA_DIR`, else `$XDG_DATA_HOME/vmpilot`, else `~/.local/share/vmpilot`. */
export function cliDataDir(env: NodeJS.ProcessEnv): string {
  if (env.DATA_DIR) return env.DATA_DIR;
  return join(env.XDG_DATA_HOME || join(homedir(), ".local", "share"), "vmpilot");
}

/** How long to wait for another vmpilot process to let go of the embedded database. */
const BUSY_WAIT_MS = 60_000;

async function open(env: NodeJS.ProcessEnv, dataDir: string): Promise<Database> {
  const deadline = Date.now() + BUSY_WAIT_MS;
  for (let pause = 50; ; pause = Math.min(pause * 2, 1000)) {
    try {
      return await openDatabase({
        databaseUrl: env.DATABASE_URL || undefined,
        dataDir,
        poolSize: 2,
      });
    } catch (error) {
      if (!(error instanceof DataDirBusyError)) throw error;
      // An app (`npm start`) on the same data dir holds it for good.
      if (Date.now() > deadline) throw new UsageError(error.message);
      await delay(pause);
    }
  }
}

/** Opens the store, runs fn, and closes it, however fn ends. */
export async function withStore<T>(
  env: NodeJS.ProcessEnv,
  dataDir: string,
  fn: (db: Database["pool"]) => Promise<T>,
): Promise<T> {
  const db = await open(env, dataDir);
  try {
    return await fn(db.pool);
  } finally {
    await db.close();
  }
}
