import { createHash, randomUUID } from "node:crypto";
import { access, appendFile, mkdir, readdir, readFile, rename, rm } from "node:fs/promises";
import { join, relative } from "node:path";
import { fallbackLogger, type Logger } from "../../log/logger.ts";
import type { Ref } from "./checkout-files.ts";
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
  // "memory://" keeps only the database in memory: a mirror needs a directory on disk.
  if (dataDir === "memory://") throw new Error("a repository mirror needs DATA_DIR on disk");
  const clean = cleanRepoUrl(repo);
  const credentials = auth ?? clean.auth;
  const mirrors = join(dataDir, "mirrors");
  const path = join(mirrors, mirrorName(clean.url));
  return serialized(path, async () => {
    if (await hasHead(path)) {
      await gitClient(path, credentials, { lockFile: join(path, LOCK_FILE) }).raw([
        "fetch",
        "--prune",
        "--prune-tags",
        "--tags",
        "origin",
      ]);
      // After this fetch and before the next, without delaying this job; and not after every
      // fetch: objects pile up over many.
      if (maintenanceDue(path)) {
        serialized(path, () => maintainMirror(path)).catch((error: unknown) => {
          logger.warn({ err: error, mirror: path }, "could not repack a mirror");
        });
      }
      return { path, url: clean.url };
    }
    await mkdir(mirrors, { recursive: true });
    const partial = `${path}.partial-${randomUUID()}`;
    try {
      await gitClient(mirrors, credentials).raw([
        "clone",
        "--bare",
        // Checkouts borrow this mirror's objects; automatic gc must never prune them away.
        "--config",
        "gc.auto=0",
        "--",
        clean.url,
        partial,
      ]);
      // What a bare clone fetched, its later fetches update too (as `git config` would add it;
      // clone would take it as a second mapping of the same refs).
      const fetch = '[remote "origin"]\n\tfetch = +refs/heads/*:refs/heads/*\n';
      await appendFile(join(partial, "config"), fetch);
      await rename(partial, path);
      // A new mirror has nothing to repack for a while.
      lastMaintained.set(path, Date.now());
    } catch (error) {
      await rm(partial, { recursive: true, force: true });
      // Another worker process sharing the data dir made the mirror first: use theirs.
      if (!(await hasHead(path))) throw error;
    }
    return { path, url: clean.url };
  });
}

/**
 * Fetches a pull request's head into the mirror from the repository's own `refs/pull/<n>/head`,
 * which holds a fork's commits too (no branch here does), and resolves to its commit. Kept
 * under that ref, which the mirror's fetches neither list nor prune.
 */
export function fetchPullHead(mirror: Mirror, number: number, auth?: GitAuth): Promise<string> {
  if (!Number.isSafeInteger(number) || number <= 0) throw new Error(`bad pull request ${number}`);
  const ref = `refs/pull/${number}/head`;
  return serialized(mirror.path, async () => {
    const git = gitClient(mirror.path, auth, { lockFile: join(mirror.path, LOCK_FILE) });
    await git.raw(["fetch", "--no-tags", "origin", `+${ref}:${ref}`]);
    return (await gitClient(mirror.path).raw(["rev-parse", "--verify", `${ref}^{commit}`])).trim();
  });
}

/** How often a mirror's objects are counted, at most. */
const MAINTENANCE_EVERY_MS = 10 * 60_000;
const lastMaintained = new Map<string, number>();

function maintenanceDue(path: string): boolean {
  const now = Date.now();
  if (now - (lastMaintained.get(path) ?? 0) < MAINTENANCE_EVERY_MS) return false;
  lastMaintained.set(path, now);
  return true;
}

/** Past these a mirror is repacked: small fetches leave loose objects, larger ones a pack each. */
const REPACK_LIMITS = { looseObjects: 2000, packs: 30 };

/**
 * Packs a mirror's refs, which every job reads (mirrorRefs: one file, not one per branch a fetch
 * left), and its objects once they have piled up. Unreachable objects are kept: checkouts borrow
 * the mirror's objects, and one may still need a commit a force-push left behind. Returns whether
 * it repacked the objects.
 */
export async function maintainMirror(path: string, limits = REPACK_LIMITS): Promise<boolean> {
  const locked = gitClient(path, undefined, { lockFile: join(path, LOCK_FILE) });
  await locked.raw(["pack-refs", "--all", "--prune"]);
  const stats = await gitClient(path).raw(["count-objects", "-v"]);
  const stat = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(stats)?.[1] ?? 0);
  if (stat("count") <= limits.looseObjects && stat("packs") <= limits.packs) return false;
  await locked.raw(["repack", "-a", "-d", "-q", "--keep-unreachable"]);
  return true;
}

const SHA_LINE = /^([0-9a-f]{40}|[0-9a-f]{64})$/;

/** Loose refs below `dir` (`refs/heads` or `refs/tags` of the mirror), full names to commits. */
async function looseRefs(path: string, dir: string): Promise<Map<string, string>> {
  const refs = new Map<string, string>();
  const entries = await readdir(join(path, dir), { recursive: true, withFileTypes: true }).catch(
    () => [],
  );
  for (const entry of entries) {
    if (!entry.isFile() || entry.name.endsWith(".lock")) continue;
    const file = join(entry.parentPath, entry.name);
    const sha = (await readFile(file, "utf8").catch(() => "")).trim();
    if (SHA_LINE.test(sha)) refs.set(relative(path, file), sha);
  }
  return refs;
}

/**
 * The mirror's branches (name to commit) and tags, as its last fetch left them: read from its
 * files, which only git fetch and clone write (a `for-each-ref` would be a process per job). A
 * loose ref wins over a packed one, as in git; a tag's `peeled` is known when it is packed.
 */
export async function mirrorRefs(
  mirror: Mirror,
): Promise<{ heads: Map<string, string>; tags: Ref[] }> {
  // Loose refs first, then packed-refs, as git reads them: a `pack-refs --prune` (maintenance,
  // here or in another process) writes packed-refs before it deletes the loose files, so a ref
  // missed among the loose ones is in the packed-refs read after. Read the other way round, a
  // pack between the two reads hides the branch, and a continued branch would start afresh.
  const [heads, tags] = await Promise.all([
    looseRefs(mirror.path, "refs/heads"),
    looseRefs(mirror.path, "refs/tags"),
  ]);
  const packed = await readFile(join(mirror.path, "packed-refs"), "utf8").catch(() => "");
  const peeled = new Map<string, string>();
  let last: string | undefined;
  for (const line of packed.split("\n")) {
    if (line.startsWith("^")) {
      if (last && SHA_LINE.test(line.slice(1))) peeled.set(last, line.slice(1));
      continue;
    }
    const [sha = "", name = ""] = line.split(" ");
    last = undefined;
    if (!SHA_LINE.test(sha)) continue;
    const loose = name.startsWith("refs/heads/")
      ? heads
      : name.startsWith("refs/tags/")
        ? tags
        : undefined;
    if (loose && !loose.has(name)) {
      loose.set(name, sha);
      last = name;
    }
  }
  return {
    heads: new Map([...heads].map(([name, sha]) => [name.slice("refs/heads/".length), sha])),
    tags: [...tags].map(([name, sha]) => {
      const commit = peeled.get(name);
      return commit ? { name, sha, peeled: commit } : { name, sha };
    }),
  };
}

/** The branch the repository's HEAD named when the mirror was made. */
export async function defaultBranch(mirror: Mirror): Promise<string> {
  const head = await readFile(join(mirror.path, "HEAD"), "utf8");
  const name = /^ref: refs\/heads\/(.+)\n?$/.exec(head)?.[1];
  if (name === undefined) throw new Error(`${mirror.url} has no default branch`);
  return name;
}
