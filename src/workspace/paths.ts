import { readlink, realpath } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";

/** A path that points outside the workspace; the message is fit to show the model. */
// Fields are declared rather than constructor parameters: the workspace agent runs this file
// with Node's type stripping, which has no parameter properties.
export class PathEscapeError extends Error {
  readonly requested: string;
  constructor(requested: string, reason: string) {
    super(`Path ${JSON.stringify(requested)} is outside the workspace: ${reason}`);
    this.requested = requested;
    this.name = "PathEscapeError";
  }
}

const MAX_LINK_HOPS = 40;

function isWithin(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

function errorCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException).code;
}

/**
 * The real path of `target` with every symlink followed — including a dangling last link, whose
 * target a write would create — for paths that do not exist yet.
 */
async function realResolve(target: string, hops = 0): Promise<string> {
  try {
    return await realpath(target);
  } catch (error) {
    if (errorCode(error) !== "ENOENT" && errorCode(error) !== "ENOTDIR") throw error;
  }
  const parent = dirname(target);
  if (parent === target) return target;
  const candidate = join(await realResolve(parent, hops), basename(target));
  let link: string;
  try {
    link = await readlink(candidate);
  } catch {
    return candidate;
  }
  if (hops >= MAX_LINK_HOPS) throw new Error("Too many levels of symbolic links");
  return realResolve(resolve(dirname(candidate), link), hops + 1);
}

/**
 * Resolves `path` (relative to `root`, or absolute) to a real absolute path inside `root`.
 * Rejects `..` escapes, absolute paths elsewhere, and symlinks that lead out of the root.
 * The path itself need not exist, so this also guards file creation.
 */
export async function resolveInside(root: string, path: string): Promise<string> {
  if (path.includes("\0")) throw new PathEscapeError(path, "it contains a NUL byte");
  const realRoot = await realpath(root);
  const lexical = resolve(root, path);
  if (!isWithin(resolve(root), lexical) && !isWithin(realRoot, lexical)) {
    throw new PathEscapeError(path, "it leads out of the workspace root");
  }
  const real = await realResolve(lexical);
  if (!isWithin(realRoot, real)) {
    // Not naming the target: it is a host path (maybe with the worker's pid, via /proc/self).
    throw new PathEscapeError(path, "a symbolic link leads out of it");
  }
  return real;
}
