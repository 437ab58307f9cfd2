import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** The process exists (EPERM: it does, as another user's). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

const lockedHere = new Set<string>();

/** A live process (maybe this one) holds the lock. */
export class LockHeldError extends Error {
  readonly holder: number;
  constructor(path: string, holder: number) {
    super(`${path} is held by process ${holder}`);
    this.holder = holder;
  }
}

/**
 * Takes a lock file holding our pid; a lock left by a process that is gone is taken over. A
 * container restart can give us the pid of the process that left the lock, so our own pid counts
 * as held only when this process took the lock.
 */
export async function lockFile(path: string): Promise<() => Promise<void>> {
  for (;;) {
    try {
      await writeFile(path, String(process.pid), { flag: "wx" });
      lockedHere.add(path);
      return async () => {
        lockedHere.delete(path);
        await rm(path, { force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const holder = Number(await readFile(path, "utf8").catch(() => ""));
    const held = holder === process.pid ? lockedHere.has(path) : holder > 0 && isRunning(holder);
    if (held) throw new LockHeldError(path, holder);
    await rm(path, { force: true });
  }
}

/** Another live process serves the embedded database's files. */
export class DataDirBusyError extends Error {
  readonly holder: number;
  constructor(dataDir: string, holder: number) {
    super(
      `the embedded database in ${dataDir} is in use by process ${holder} ` +
        `(remove ${join(dataDir, "pglite.lock")} if it is not); set DATABASE_URL to share one database between processes`,
    );
    this.name = "DataDirBusyError";
    this.holder = holder;
  }
}

/**
 * PGlite is a single-process database: a second process opening the same files would corrupt them.
 * The lock holds the pid of the process serving the files (embedded-process.ts).
 */
export async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  const path = join(dataDir, "pglite.lock");
  try {
    return await lockFile(path);
  } catch (error) {
    if (!(error instanceof LockHeldError)) throw error;
    throw new DataDirBusyError(dataDir, error.holder);
  }
}
