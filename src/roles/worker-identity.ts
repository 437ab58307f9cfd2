// A worker's identity across restarts: a UUID kept in DATA_DIR, owned by whichever process holds
// DATA_DIR's worker lock. The jobs table records which identity runs each attempt, so a restarted
// worker knows which running jobs died with its previous instance (queue.ts, recoverOrphans).
import { randomUUID } from "node:crypto";
import { lstat, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import type { Logger } from "../log/logger.ts";
import { LockHeldError, lockFile } from "../store/data-dir-lock.ts";

export interface WorkerIdentity {
  id: string;
  release(): Promise<void>;
}

const ID_FILE_LIMIT = 64;

async function readOrCreateId(path: string): Promise<string> {
  const stat = await lstat(path).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return null;
    throw error;
  });
  if (!stat) {
    const id = randomUUID();
    await writeFile(path, id, { flag: "wx" });
    return id;
  }
  if (!stat.isFile() || stat.size > ID_FILE_LIMIT) {
    throw new Error(
      `${path} must be a regular file holding a worker id; remove it to start afresh`,
    );
  }
  const parsed = z.uuid().safeParse((await readFile(path, "utf8")).trim());
  if (!parsed.success)
    throw new Error(`${path} does not hold a worker id; remove it to start afresh`);
  return parsed.data;
}

/**
 * The identity stored in dataDir, or a new one for this process only when dataDir is in memory or
 * another live process holds it (two workers sharing a DATA_DIR): that one recovers its own jobs.
 */
export async function claimWorkerIdentity(
  dataDir: string,
  logger: Logger,
): Promise<WorkerIdentity> {
  const ephemeral = { id: randomUUID(), release: async () => {} };
  if (dataDir === "memory://") return ephemeral;
  await mkdir(dataDir, { recursive: true });
  let release: () => Promise<void>;
  try {
    release = await lockFile(join(dataDir, "worker.lock"));
  } catch (error) {
    if (!(error instanceof LockHeldError)) throw error;
    logger.warn(
      { holder: error.holder },
      "another worker holds this DATA_DIR; not recovering its jobs",
    );
    return ephemeral;
  }
  try {
    return { id: await readOrCreateId(join(dataDir, "worker-id")), release };
  } catch (error) {
    await release();
    throw error;
  }
}
