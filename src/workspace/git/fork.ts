// A fork's pull request as the worker reads it, in its mirror, where only the worker's git runs
// (the checkout is the agent's, see publish.ts): the base branch's files (the repository's
// instructions, never the fork's), and the job's change against the pull request's head with the
// pull request's own diff, for the review that suggests it (github/suggestions.ts).
import type { Workspace } from "../types.ts";
import type { CommitOptions } from "./commit.ts";
import { gitClient } from "./git.ts";
import { defaultBranch, type Mirror, mirrorRefs } from "./mirror.ts";
import { takeWorkspaceCommits } from "./transfer.ts";

/** Past this a diff is cut; a review shows far less (65,536 characters a comment). */
const MAX_DIFF_BYTES = 4_000_000;

/**
 * Plain unified diffs whatever the operator's git config says (prefixes, context, colour,
 * external or text-converting drivers), paths unquoted but for control characters.
 */
const DIFF = [
  "-c",
  "core.quotePath=false",
  "diff",
  "--no-color",
  "--no-ext-diff",
  "--no-textconv",
  "--src-prefix=a/",
  "--dst-prefix=b/",
  "-U3",
  "-M",
];

/** The commit of the pull request's base branch in the mirror; the default branch's without it. */
export async function baseCommit(mirror: Mirror, branch: string): Promise<string> {
  const { heads } = await mirrorRefs(mirror);
  const sha = heads.get(branch) ?? heads.get(await defaultBranch(mirror));
  if (sha === undefined) throw new Error(`${mirror.url} has no branch ${branch}`);
  return sha;
}

/** Files of a commit of the mirror, read as a workspace's are (missing or too large: an error). */
export function committedFiles(mirror: string, commit: string): Pick<Workspace, "readFile"> {
  return {
    async readFile(path, maxBytes) {
      const read = await gitClient(mirror).rawCapped(
        ["cat-file", "blob", `${commit}:${path}`],
        maxBytes,
      );
      if (read.cut) throw new Error(`${path} is larger than ${maxBytes} bytes`);
      return Buffer.from(read.stdout);
    },
  };
}

export interface PullChanges {
  /** The pull request's head the work starts from, which the diffs are of. */
  head: string;
  /** The job's change: the diff from the pull request's head to its work. */
  diff: string;
  /** The pull request's diff as GitHub shows it: from the merge base with its base, to the head. */
  pullDiff: string;
  /** Which of them is longer than MAX_DIFF_BYTES and cut there, mid-file. */
  cut: { diff: boolean; pullDiff: boolean };
}

/**
 * Commits the workspace's work, takes it into the mirror, and diffs it there against the head it
 * starts from: `head`, the checkout's, or the older one the run of an earlier attempt of the job
 * began from, when that run was kept and restored (jobs/run/kept.ts) after the head moved on. Null
 * when the job changed nothing.
 */
export async function pullRequestChanges(input: {
  workspace: Workspace;
  mirror: string;
  head: string;
  base: string;
  commit: CommitOptions;
  signal?: AbortSignal;
}): Promise<PullChanges | null> {
  const { mirror } = input;
  const sha = await takeWorkspaceCommits(
    input.workspace,
    mirror,
    input.head,
    input.commit,
    input.signal,
  );
  if (sha === null) return null;
  const git = gitClient(mirror);
  const head = (await git.raw(["merge-base", sha, input.head])).trim();
  const diff = await git.rawCapped([...DIFF, head, sha, "--"], MAX_DIFF_BYTES);
  if (!diff.stdout) return null;
  // Unrelated histories have no merge base, and a pull request no line to suggest on.
  const mergeBase = await git.raw(["merge-base", input.base, head]).catch(() => "");
  const pullDiff = mergeBase.trim()
    ? await git.rawCapped([...DIFF, mergeBase.trim(), head, "--"], MAX_DIFF_BYTES)
    : { stdout: "", cut: false };
  return {
    head,
    diff: diff.stdout,
    pullDiff: pullDiff.stdout,
    cut: { diff: diff.cut, pullDiff: pullDiff.cut },
  };
}
