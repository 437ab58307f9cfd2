// The new commits leaving a workspace, as a file the worker copies out through the workspace's
// containment checks and reads only as data: a bundle for the CLI to fetch, or a pack (with the
// commit it ends at) for the mirror, where `git index-pack` takes it in one process. Both are made
// inside the workspace, in one command, where the agent's commands run anyway (see publish.ts).
import { mkdtemp, open, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Workspace } from "../types.ts";
import { type CommitOptions, commitIdentity, commitMessage, GIT, quote } from "./commit.ts";
import { gitClient } from "./git.ts";

const BUNDLE = ".git/vmpilot-publish.bundle";
const PACK = ".git/vmpilot-publish.pack";
/** Where a script keeps git's messages, read back by bash itself: `$(...)` costs a process. */
const OUT = ".git/vmpilot-publish.out";
/** The sandbox writes the file, so its size is checked before the worker copies it out. */
export const MAX_BUNDLE_BYTES = 500_000_000;
const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
/** A script's exit code when HEAD holds nothing the base does not. */
const NOTHING_NEW = 3;

export interface Transferred {
  /** The commit the transferred history ends at. */
  sha: string;
  /** The bundle or pack, in `dir`, a fresh directory of the worker's the caller removes. */
  file: string;
  dir: string;
}

/** After a git whose messages went to OUT: fine when they say one of `allowed`, then `then`. */
function unlessSaid(allowed: readonly string[], then: string): string[] {
  return [
    `  out=$(<${OUT})`,
    '  case "$out" in',
    `    ${allowed.map((text) => `*'${text}'*`).join("|")}) ${then} ;;`,
    `    *) printf '%s\\n' "$out" >&2; exit 1 ;;`,
    "  esac",
  ];
}

/** Commits everything, hooks off; nothing to commit is no failure. */
function commitLines(commit: CommitOptions): string[] {
  const message = quote(commitMessage(commit));
  return [
    "$G add -A || exit 1",
    `if ! $G -c core.hooksPath=/dev/null commit --quiet --no-verify -m ${message} >${OUT} 2>&1; then`,
    ...unlessSaid(["nothing to commit", "nothing added to commit"], ":"),
    "fi",
  ];
}

/**
 * HEAD's commit into `sha`, read by bash from the files git just wrote (a `rev-parse` would be a
 * process of its own); the agent may have made them say anything, and then its own push fails.
 */
const HEAD_LINES = [
  "read -r head ref <.git/HEAD || exit 1",
  "sha=$head",
  'if [ "$head" = ref: ]; then',
  "  sha=",
  '  if [ -f ".git/$ref" ]; then read -r sha <".git/$ref"',
  '  elif [ -f .git/packed-refs ]; then while read -r s r; do [ "$r" = "$ref" ] && sha=$s; done <.git/packed-refs',
  "  fi",
  "fi",
];

/** Runs `script` in the workspace; resolves to its stdout, or null when it found nothing new. */
async function inside(
  workspace: Workspace,
  script: string[],
  commit: CommitOptions | undefined,
  signal: AbortSignal | undefined,
): Promise<string | null> {
  const result = await workspace.exec([`G=${quote(GIT)}`, ...script].join("\n"), {
    signal,
    timeoutMs: 5 * 60_000,
    env: commit && commitIdentity(commit),
  });
  if (result.exitCode === NOTHING_NEW) return null;
  if (result.exitCode !== 0) throw new Error(`git failed: ${result.stderr.trim()}`);
  return result.fullStdout;
}

/** Copies `path` of the workspace to a fresh directory of the worker's. */
async function copyOut(workspace: Workspace, path: string, name: string) {
  const dir = await mkdtemp(join(tmpdir(), "vmpilot-publish-"));
  const file = join(dir, name);
  try {
    await workspace.copyOut(path, file, MAX_BUNDLE_BYTES);
    return { file, dir };
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
}

/** The first bytes of a file the worker copied out. */
async function head(file: string, bytes: number): Promise<Buffer> {
  const handle = await open(file, "r");
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(bytes), 0, bytes, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** The commit a bundle's header names as its HEAD: what fetching the bundle brings. */
async function bundleHead(file: string): Promise<string> {
  const header = (await head(file, 64 * 1024)).toString("latin1").split("\n\n")[0] ?? "";
  for (const line of header.split("\n")) {
    const [sha, name] = line.split(" ");
    if (name === "HEAD" && sha && SHA.test(sha)) return sha;
  }
  throw new Error("the workspace's bundle names no HEAD");
}

/**
 * A bundle of the commits since `baseSha`, for `git fetch`. Resolves to null when HEAD holds
 * nothing the base does not.
 */
export async function bundleWorkspaceCommits(
  workspace: Workspace,
  baseSha: string,
  signal?: AbortSignal,
): Promise<Transferred | null> {
  if (!SHA.test(baseSha)) throw new Error(`bad base sha ${baseSha}`);
  const script = [
    `if ! $G bundle create -q ${BUNDLE} HEAD ^${baseSha} >${OUT} 2>&1; then`,
    ...unlessSaid(["Refusing to create empty bundle"], `exit ${NOTHING_NEW}`),
    "fi",
  ];
  if ((await inside(workspace, script, undefined, signal)) === null) return null;
  const copied = await copyOut(workspace, BUNDLE, "work.bundle");
  try {
    return { sha: await bundleHead(copied.file), ...copied };
  } catch (error) {
    await rm(copied.dir, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Commits what `commit` says, then packs the commits since `baseSha` (thin: against the base,
 * which the mirror has), for `git index-pack --fix-thin`. Resolves to null when HEAD holds
 * nothing the base does not.
 */
async function packWorkspaceCommits(
  workspace: Workspace,
  baseSha: string,
  commit: CommitOptions,
  signal?: AbortSignal,
): Promise<Transferred | null> {
  if (!SHA.test(baseSha)) throw new Error(`bad base sha ${baseSha}`);
  const script = [
    ...commitLines(commit),
    ...HEAD_LINES,
    `[ "$sha" = ${baseSha} ] && exit ${NOTHING_NEW}`,
    `if ! $G pack-objects --revs --thin -q --stdout <<<"$sha"$'\\n'^${baseSha} >${PACK} 2>${OUT}; then`,
    `  printf '%s\\n' "$(<${OUT})" >&2; exit 1`,
    "fi",
    'printf "%s\\n" "$sha"',
  ];
  const said = await inside(workspace, script, commit, signal);
  if (said === null) return null;
  const sha = said.trim();
  if (!SHA.test(sha)) throw new Error(`the workspace's HEAD is not a commit: ${sha.slice(0, 80)}`);
  const copied = await copyOut(workspace, PACK, "work.pack");
  // "PACK", a version, then how many objects: none when HEAD is behind the base.
  const header = await head(copied.file, 12);
  if (header.length === 12 && header.toString("latin1", 0, 4) === "PACK") {
    if (header.readUInt32BE(8) > 0) return { sha, ...copied };
    await rm(copied.dir, { recursive: true, force: true });
    return null;
  }
  await rm(copied.dir, { recursive: true, force: true });
  throw new Error("the workspace's pack is not a pack");
}

/**
 * Commits the workspace's work and takes its new commits into the mirror, as objects under no
 * ref: a push names the commit, a diff reads it. Resolves to the commit, or null when HEAD holds
 * nothing `baseSha` does not. Indexing needs the objects the pack's deltas build on; a fetch would
 * walk the whole history once more.
 */
export async function takeWorkspaceCommits(
  workspace: Workspace,
  mirror: string,
  baseSha: string,
  commit: CommitOptions,
  signal?: AbortSignal,
): Promise<string | null> {
  const pack = await packWorkspaceCommits(workspace, baseSha, commit, signal);
  if (!pack) return null;
  try {
    await gitClient(mirror).rawFrom(pack.file, ["index-pack", "--stdin", "--fix-thin"]);
    return pack.sha;
  } finally {
    await rm(pack.dir, { recursive: true, force: true });
  }
}
