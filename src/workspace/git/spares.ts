import { randomUUID } from "node:crypto";
import { mkdir, readdir, rename, rm, stat, utimes } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Logger } from "../../log/logger.ts";
import { attachScratchDisk, makeScratchImage, type ScratchDisk } from "../sandbox/scratch-disk.ts";
import {
  type CheckoutRefs,
  type Ref,
  readBranches,
  writeCheckout,
  writeRefs,
} from "./checkout-files.ts";
import { gitClient, validateBranchName } from "./git.ts";
import type { Mirror } from "./mirror.ts";

/**
 * One ready-made checkout per repository, kept in `<dataDir>/spares/<mirror>/`. Writing a large
 * working tree is most of the cost of a new workspace; a job that claims a spare only rewrites
 * the files that changed since the spare was made. Spares are complete before they are renamed
 * into place, and claimed by renaming them out, so two jobs can never take the same one. Where a
 * job's checkout lives on a disk of its own (sandbox.ts), a spare is that disk, unmounted: its
 * image, holding the tree at `repo/`; a claimed one is mounted where the job's disk goes.
 */

const PARTIAL = ".partial-";
/** Where a spare disk holds its tree, as a job's disk holds the checkout. */
export const SPARE_TREE = "repo";
/** A partial spare this old was left by a worker that died mid-clone. */
const STALE_PARTIAL_MS = 60 * 60_000;

const pending = new Map<string, Promise<void>>();

/** Spares on disks of `diskMb` apart: a disk of another size is of no use to the job. */
function sparesDir(dataDir: string, mirror: Mirror, diskMb?: number): string {
  const disk = diskMb === undefined ? "" : `@disk-${diskMb}mb`;
  return join(dataDir, "spares", `${basename(mirror.path)}${disk}`);
}

/** Ready spares first come, first taken; a name beginning with "." is one being made. */
async function readySpares(dir: string): Promise<string[]> {
  return (await readdir(dir).catch(() => [])).filter((name) => !name.startsWith("."));
}

/** Moves a spare to `dest` and returns true, or returns false when none is ready. */
export async function claimSpare(dataDir: string, mirror: Mirror, dest: string): Promise<boolean> {
  const dir = sparesDir(dataDir, mirror);
  for (const name of await readySpares(dir)) {
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
 * Moves a spare disk to `dir`, an empty directory, and mounts it there, its tree at `dir/repo`;
 * undefined when none is ready.
 */
export async function claimSpareDisk(
  dataDir: string,
  mirror: Mirror,
  dir: string,
  diskMb: number,
): Promise<ScratchDisk | undefined> {
  const spares = sparesDir(dataDir, mirror, diskMb);
  for (const name of await readySpares(spares)) {
    try {
      await rename(join(spares, name), dir);
    } catch {
      continue; // Taken by another job a moment ago: try the next.
    }
    return attachScratchDisk(dir);
  }
  return undefined;
}

/** What a job's checkout is made at: in a spare it claimed, or anew (checkout.ts). */
export interface SpareTarget {
  /** The branch the job works on; created at `sha` unless it is `baseBranch` itself. */
  branch: string;
  baseBranch: string;
  sha: string;
  /** The mirror's branches and their commits, which become the checkout's remote-tracking refs. */
  heads: ReadonlyMap<string, string>;
  tags: readonly Ref[];
  /** The branch the mirror's HEAD names. */
  defaultBranch: string;
}

/** The refs of a checkout of `target`, keeping local branches it already has. */
export function targetRefs(
  target: SpareTarget,
  branches: ReadonlyMap<string, string> = new Map(),
): CheckoutRefs {
  const local = new Map(branches);
  local.set(target.baseBranch, target.sha);
  local.set(validateBranchName(target.branch), target.sha);
  return {
    head: target.branch,
    branches: local,
    remote: target.heads,
    remoteHead: target.defaultBranch,
    tags: target.tags,
  };
}

/** Paths that `git diff-tree -r -z` reports, split into those to delete and those to write. */
function parseDiffTree(output: string): { removed: string[]; written: string[] } {
  const fields = output.split("\0");
  const removed: string[] = [];
  const written: string[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const status = fields[i]?.split(" ")[4] ?? "";
    (status.startsWith("D") ? removed : written).push(fields[i + 1] as string);
  }
  return { removed, written };
}

/**
 * Dates a claimed spare's index now, once the second its files were written in has passed. The
 * read-tree that made the spare wrote the index in the same second as the last thousands of files,
 * and git takes a file as new as its index for possibly changed since ("racily clean"): every git
 * that writes the index reads and hashes each such file again and copies its entry into the split
 * index (50,000 files: 5,000 of them, 50 to 250 ms of the claim). Nothing has written a spare's
 * files since git recorded them, as nothing can reach a spare before it is claimed; so the index
 * is as true now as when it was written, and its date says that no file is newer than it.
 */
async function dateIndex(root: string, now: number): Promise<void> {
  const index = join(root, ".git", "index");
  const { mtimeMs } = await stat(index);
  if (Math.floor(now / 1000) <= Math.floor(mtimeMs / 1000)) return;
  const date = new Date(now);
  await utimes(index, date, date);
}

/**
 * Moves a claimed spare to the target commit, whose objects it already sees through alternates.
 * Only the paths that differ are touched: a whole-tree `read-tree -m -u` walks and compares all
 * 50,000 entries of a large repository (~100 ms), a path-limited checkout reads and writes the
 * split index only (~20 ms). Still at that commit, as it mostly is, it needs no git at all.
 */
export async function refreshSpare(
  root: string,
  target: SpareTarget,
  now = Date.now(),
): Promise<void> {
  const git = gitClient(root);
  const [spare] = await Promise.all([readBranches(root), dateIndex(root, now)]);
  if (spare.head !== target.sha) {
    const diff = await git.raw(["diff-tree", "-r", "-z", "--no-renames", "HEAD", target.sha]);
    const { removed, written } = parseDiffTree(diff);
    // Deletions first: a file may be replaced by a directory of the same name, or the reverse.
    // Without preloading, git stats only the named paths, not all 50,000 (400 ms when the inodes
    // have left the cache, as they do on a busy worker).
    const paths = ["-c", "core.preloadIndex=false", "--literal-pathspecs"];
    const fromFile = ["--pathspec-from-file=-", "--pathspec-file-nul"];
    if (removed.length > 0) await git.raw([...paths, "rm", "-q", ...fromFile], removed.join("\0"));
    if (written.length > 0) {
      await git.raw([...paths, "checkout", target.sha, ...fromFile], written.join("\0"));
    }
  }
  await writeRefs(root, targetRefs(target, spare.branches));
}

/** What a spare is made from: the mirror's refs as a job just read them. */
type MirrorRefs = Pick<SpareTarget, "heads" | "tags" | "defaultBranch">;

async function makeSpare(
  dataDir: string,
  mirror: Mirror,
  refs: MirrorRefs,
  diskMb: number | undefined,
): Promise<void> {
  const dir = sparesDir(dataDir, mirror, diskMb);
  await mkdir(dir, { recursive: true });
  const entries = await readdir(dir);
  for (const name of entries.filter((n) => n.startsWith(PARTIAL))) {
    const { mtimeMs } = await stat(join(dir, name));
    if (Date.now() - mtimeMs > STALE_PARTIAL_MS)
      await rm(join(dir, name), { recursive: true, force: true });
  }
  if (entries.some((name) => !name.startsWith("."))) return;
  const partial = join(dir, `${PARTIAL}${randomUUID()}`);
  const sha = refs.heads.get(refs.defaultBranch);
  if (sha === undefined) return;
  const target = { ...refs, branch: refs.defaultBranch, baseBranch: refs.defaultBranch, sha };
  let disk: ScratchDisk | undefined;
  try {
    if (diskMb !== undefined) {
      await mkdir(partial);
      await makeScratchImage(partial, diskMb);
      disk = await attachScratchDisk(partial);
    }
    const tree = disk ? join(partial, SPARE_TREE) : partial;
    await writeCheckout(tree, { mirror: mirror.path, url: mirror.url }, targetRefs(target), {
      splitIndex: true,
    });
    await disk?.detach();
    disk = undefined;
    await rename(partial, join(dir, randomUUID()));
  } catch (error) {
    await disk?.unmount();
    await rm(partial, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Keeps spares for the `limit` repositories used most recently: a spare is a whole working tree,
 * and a worker serving many repositories would otherwise keep one of each. A repository's spares
 * directory changes (and so its mtime) whenever a spare is claimed from it or added to it.
 */
async function evictSpares(dataDir: string, limit: number): Promise<void> {
  const root = join(dataDir, "spares");
  const repos = await Promise.all(
    (await readdir(root)).map(async (name) => {
      const dir = join(root, name);
      const ready = await readySpares(dir);
      const { mtimeMs } = await stat(dir);
      return { dir, ready, mtimeMs };
    }),
  );
  const stocked = repos.filter((repo) => repo.ready.length > 0);
  stocked.sort((a, b) => b.mtimeMs - a.mtimeMs);
  for (const repo of stocked.slice(limit)) {
    // Ready spares only: a partial one belongs to a job making it right now.
    for (const name of repo.ready) await rm(join(repo.dir, name), { recursive: true, force: true });
  }
}

/** Default for how many repositories keep a spare (SPARE_CHECKOUTS). */
export const SPARE_REPOSITORIES = 20;

/**
 * Starts making a spare in the background unless one exists or is on its way, then drops the
 * spares of the repositories beyond the `limit` most recently used.
 */
export function replenishSpare(
  dataDir: string,
  mirror: Mirror,
  refs: MirrorRefs,
  logger: Logger,
  limit = SPARE_REPOSITORIES,
  /** Made on a disk of this size (claimSpareDisk), for jobs whose checkout lives on one. */
  diskMb?: number,
): void {
  const key = sparesDir(dataDir, mirror, diskMb);
  if (pending.has(key)) return;
  const task = makeSpare(dataDir, mirror, refs, diskMb)
    .then(() => evictSpares(dataDir, limit))
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
