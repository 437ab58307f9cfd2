// Files of a branch read, and one changed in a new commit, by the worker's own git in the mirror:
// no checkout and no workspace, for what the worker writes itself (the lessons file, jobs/run/
// memory.ts) and reads for the prompt from the default branch. The mirror is trusted: only the
// worker's git writes it.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type CommitIdentity, commitIdentity } from "./commit.ts";
import { gitClient } from "./git.ts";

const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

/**
 * The text of `path` at `rev` (a commit, or the mirror's HEAD: the default branch); undefined when
 * there is no such file, or it is not a regular file, or it is larger than `maxBytes`.
 */
export async function readMirrorFile(
  mirror: string,
  rev: string,
  path: string,
  maxBytes: number,
): Promise<string | undefined> {
  const git = gitClient(mirror);
  // "<mode> blob <sha> <size>\t<path>", or nothing when the path is not there.
  const listed = await git.raw(["ls-tree", "-l", "-z", rev, "--", path]);
  const [meta = "", name] = listed.split("\0")[0]?.split("\t") ?? [];
  const [mode, type, sha, size] = meta.split(/\s+/);
  if (name !== path || type !== "blob" || !mode?.startsWith("100") || !sha || !SHA.test(sha)) {
    return undefined;
  }
  if (Number(size) > maxBytes) return undefined;
  return git.raw(["cat-file", "blob", sha]);
}

/** Which of `paths` `rev` holds no file or folder at. */
export async function missingPaths(
  mirror: string,
  rev: string,
  paths: readonly string[],
): Promise<Set<string>> {
  const asked = paths.filter((path) => !path.includes("\n"));
  if (asked.length === 0) return new Set();
  const said = await gitClient(mirror).raw(
    ["cat-file", "--batch-check=%(objectname)"],
    asked.map((path) => `${rev}:${path}\n`).join(""),
  );
  const answers = said.split("\n");
  return new Set(asked.filter((_, i) => answers[i]?.endsWith(" missing")));
}

/** A commit on `parent` whose tree is the parent's with `path` holding `content`. */
export async function commitFile(
  mirror: string,
  input: { parent: string; path: string; content: string; message: string; author: CommitIdentity },
): Promise<string> {
  if (!SHA.test(input.parent)) throw new Error(`bad parent ${input.parent}`);
  const dir = await mkdtemp(join(tmpdir(), "vmpilot-index-"));
  try {
    const git = gitClient(mirror, undefined, {
      env: {
        GIT_INDEX_FILE: join(dir, "index"),
        ...commitIdentity({ message: "", author: input.author }),
      },
    });
    const blob = (await git.raw(["hash-object", "-w", "--stdin"], input.content)).trim();
    await git.raw(["read-tree", input.parent]);
    await git.raw(["update-index", "--add", "--cacheinfo", `100644,${blob},${input.path}`]);
    const tree = (await git.raw(["write-tree"])).trim();
    const commit = await git.raw(["commit-tree", tree, "-p", input.parent], input.message);
    const sha = commit.trim();
    if (!SHA.test(sha)) throw new Error(`git commit-tree printed ${sha.slice(0, 80)}`);
    return sha;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
