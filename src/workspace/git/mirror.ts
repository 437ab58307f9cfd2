import { createHash, randomUUID } from "node:crypto";
import { access, mkdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { fallbackLogger, type Logger } from "../../log/logger.ts";
import { cleanRepoUrl, type GitAuth, gitClient } from "./git.ts";

/** A readable, collision-free directory name for one repository URL. */
function mirrorName(cleanUrl: string): string {
  const readable = cleanUrl
    .replace(/^[a-z][a-z0-9+.-]*:\/\//i, "")
    .replace(/\.git\/?$/, "")
    .replace(/[^A-Za-z0-9._-]+/g, "_")
    .replace(/^[._]+/, "")
    .slice(-80);
  const hash = createHash("sha256").update(cleanUrl).digest("hex").slice(0, 12);
  return `${readable}-${hash}.git`;
}

const locks = new Map<string, Promise<unknown>>();

/**
 * Runs `task` after every earlier task with the same key, so two fetches of this process never
 * share a mirror (fetches of other processes wait on the mirror's lock file).
 */
async function serialized<T>(key: string, task: () => Promise<T>): Promise<T> {
  const previous = locks.get(key) ?? Promise.resolve();
  const run = previous.then(task, task);
  const tail = run.catch(() => undefined);
  locks.set(key, tail);
  try {
    return await run;
  } finally {
    if (locks.get(key) === tail) locks.delete(key);
  }
}

/** Held by fetches and repacks of every worker process sharing the data dir. */
const LOCK_FILE = "vmpilot.lock";

export interface Mirror {
  /** The bare repository under `<dataDir>/mirrors`. */
  path: string;
  /** The repository URL without credentials. */
  url: string;
}

function hasHead(repository: string): Promise<boolean> {
  return access(join(repository, "HEAD")).then(
    () => true,
    () => false,
  );
}

/**
 * Creates or refreshes the bare mirror of a repository. Branches and tags are mirrored (not
 * every ref: GitHub's refs/pull/* would dwarf the rest). A new mirror is cloned beside its final
 * place and renamed in, so an interrupted clone never leaves a half mirror behind.
 */
export function syncMirror(
  dataDir: string,
  repo: string,
  auth?: GitAuth,
  logger: Logger = fallbackLogger(),
): Promise<Mirror> {
  const clean = cleanRepoUrl(repo);
  const credentials = auth ?? clean.auth;
  const mirrors = join(dataDir, "mirrors");
  const path = join(mirrors, mirrorName(clean.url));
  return serialized(path, async () => {
    if (await hasHead(path)) {
      await gitClient(path, credentials, { lockFile: join(path, LOCK_FILE) }).raw([
        // gc is off for mirrors (checkouts borrow their objects): nothing for maintenance to do.
        "-c",
        "maintenance.auto=false",
        "fetch",
        "--prune",
        "--prune-tags",
        "--tags",
        "origin",
      ]);
      // After this fetch and before the next, without delaying this job.
      serialized(path, () => maintainMirror(path)).catch((error: unknown) => {
        logger.warn({ err: error, mirror: path }, "could not repack a mirror");
      });
      return { path, url: clean.url };
    }
    await mkdir(mirrors, { recursive: true });
    const partial = `${path}.partial-${randomUUID()}`;
    try {
      await gitClient(mirrors, credentials).raw(["clone", "--bare", "--", clean.url, partial]);
      const git = gitClient(partial);
      await git.raw(["config", "remote.origin.fetch", "+refs/heads/*:refs/heads/*"]);
      // Checkouts borrow this mirror's objects; automatic gc must never prune them away.
      await git.raw(["config", "gc.auto", "0"]);
      await rename(partial, path);
    } catch (error) {
      await rm(partial, { recursive: true, force: true });
      // Another worker process sharing the data dir made the mirror first: use theirs.
      if (!(await hasHead(path))) throw error;
    }
    return { path, url: clean.url };
  });
}

/** Past these a mirror is repacked: small fetches leave loose objects, larger ones a pack each. */
const REPACK_LIMITS = { looseObjects: 2000, packs: 30 };

/**
 * Packs a mirror's objects into one pack once they have piled up. Unreachable objects are kept:
 * checkouts borrow the mirror's objects, and one may still need a commit a force-push left
 * behind. Returns whether it repacked.
 */
export async function maintainMirror(path: string, limits = REPACK_LIMITS): Promise<boolean> {
  const stats = await gitClient(path).raw(["count-objects", "-v"]);
  const stat = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(stats)?.[1] ?? 0);
  if (stat("count") <= limits.looseObjects && stat("packs") <= limits.packs) return false;
  await gitClient(path, undefined, { lockFile: join(path, LOCK_FILE) }).raw([
    "repack",
    "-a",
    "-d",
    "-q",
    "--keep-unreachable",
  ]);
  return true;
}

/**
 * Clones a mirror cheaply: `--shared` borrows its objects through `objects/info/alternates`
 * instead of copying them; only the working tree is written. `origin` then points at the clean
 * repository URL, never at the mirror.
 */
export async function sharedClone(mirror: Mirror, dest: string, branch: string): Promise<void> {
  await gitClient(mirror.path).raw([
    "clone",
    "--shared",
    "--branch",
    branch,
    "--",
    mirror.path,
    dest,
  ]);
  await gitClient(dest).raw(["remote", "set-url", "origin", mirror.url]);
}

/** The branch the repository's HEAD named when the mirror was made. */
export async function defaultBranch(mirror: Mirror): Promise<string> {
  return (await gitClient(mirror.path).raw(["symbolic-ref", "--short", "HEAD"])).trim();
}
