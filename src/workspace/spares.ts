import { randomUUID } from "node:crypto";
import { mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { gitClient } from "./git.ts";
import type { WorkspaceLogger } from "./logger.ts";
import { defaultBranch, type Mirror, sharedClone } from "./mirror.ts";

/**
 * One ready-made checkout per repository, kept in `<dataDir>/spares/<mirror>/`. Writing a large
 * working tree is most of the cost of a new workspace; a job that claims a spare only rewrites
 * the files that changed since the spare was made. Spares are complete before they are renamed
 * into place, and claimed by renaming them out, so two jobs can never take the same one.
 */

const PARTIAL = ".partial-";
/** A partial spare this old was left by a worker that died mid-clone. */
const STALE_PARTIAL_MS = 60 * 60_000;

const pending = new Map<string, Promise<void>>();

function sparesDir(dataDir: string, mirror: Mirror): string {
  return join(dataDir, "spares", basename(mirror.path));
}

/** Moves a spare to `dest` and returns true, or returns false when none is ready. */
export async function claimSpare(dataDir: string, mirror: Mirror, dest: string): Promise<boolean> {
  const dir = sparesDir(dataDir, mirror);
  const ready = (await readdir(dir).catch(() => [])).filter((name) => !name.startsWith("."));
  for (const name of ready) {
    try {
      await rename(join(dir, name), dest);
      return true;
    } catch {
      // Taken by another job a moment ago, or dest is on another filesystem: try the next.
    }
  }
  return false;
}

/**
 * Brings a claimed spare up to the mirror: remote-tracking refs from the mirror (objects are
 * already shared through alternates), then the base branch checked out at its current commit.
 */
export async function refreshSpare(
  root: string,
  mirror: Mirror,
  baseBranch: string,
): Promise<void> {
  const git = gitClient(root);
  await git.raw([
    "fetch",
    "--quiet",
    "--prune",
    mirror.path,
    "+refs/heads/*:refs/remotes/origin/*",
  ]);
  const target = `refs/remotes/origin/${baseBranch}`;
  // A two-way merge on a clean tree rewrites only the files that changed since the spare was
  // made; `checkout -B` would stat and rewrite the whole index, 3x slower on 50,000 files.
  await git.raw(["read-tree", "-m", "-u", "HEAD", target]);
  await git.raw(["update-ref", `refs/heads/${baseBranch}`, target]);
  await git.raw(["symbolic-ref", "HEAD", `refs/heads/${baseBranch}`]);
}

async function makeSpare(dataDir: string, mirror: Mirror): Promise<void> {
  const dir = sparesDir(dataDir, mirror);
  await mkdir(dir, { recursive: true });
  const entries = await readdir(dir);
  for (const name of entries.filter((n) => n.startsWith(PARTIAL))) {
    const { mtimeMs } = await stat(join(dir, name));
    if (Date.now() - mtimeMs > STALE_PARTIAL_MS)
      await rm(join(dir, name), { recursive: true, force: true });
  }
  if (entries.some((name) => !name.startsWith("."))) return;
  const partial = join(dir, `${PARTIAL}${randomUUID()}`);
  try {
    await sharedClone(mirror, partial, await defaultBranch(mirror));
    await rename(partial, join(dir, randomUUID()));
  } catch (error) {
    await rm(partial, { recursive: true, force: true });
    throw error;
  }
}

/** Starts making a spare in the background unless one exists or is on its way. */
export function replenishSpare(dataDir: string, mirror: Mirror, logger: WorkspaceLogger): void {
  const key = sparesDir(dataDir, mirror);
  if (pending.has(key)) return;
  const task = makeSpare(dataDir, mirror)
    .catch((error: unknown) => {
      logger.warn({ err: error, mirror: mirror.path }, "could not prepare a spare checkout");
    })
    .finally(() => pending.delete(key));
  pending.set(key, task);
}

/** Resolves once no spare is being made; for shutdown, tests and benchmarks. */
export async function sparesSettled(): Promise<void> {
  while (pending.size > 0) await Promise.all(pending.values());
}
