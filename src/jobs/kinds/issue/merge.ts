// The merge mode: the base branch merged into the pull request's branch inside the workspace
// (where the agent's commands run, for the reason commitInWorkspace gives), what git cannot merge
// left to the agent, then the merge commit pushed as a fast-forward of the branch.
import { type CommitIdentity, VMPILOT_AUTHOR } from "../../../workspace/git/commit.ts";
import { gitClient, validateBranchName } from "../../../workspace/git/git.ts";
import { publishWorkspace } from "../../../workspace/git/publish.ts";
import type { JobWorkspace } from "../../run/workspace.ts";

export interface MergeStart {
  base: string;
  /** The base branch's commit, as the worker's mirror fetched it for this job. */
  baseSha: string;
  /** Files git left conflicted. */
  conflicts: string[];
}

const CONFLICTS_FILE = ".git/vmpilot-conflicts";
const MARKER = "^(<<<<<<<|>>>>>>>)( |$)";

const MESSAGE_FILE = ".git/vmpilot-merge-message";

function identity(who: CommitIdentity): Record<string, string> {
  return {
    GIT_AUTHOR_NAME: who.name,
    GIT_AUTHOR_EMAIL: who.email,
    GIT_COMMITTER_NAME: who.name,
    GIT_COMMITTER_EMAIL: who.email,
  };
}

async function inside(
  ws: JobWorkspace,
  command: string,
  signal: AbortSignal,
  env?: Record<string, string>,
) {
  return ws.workspace.exec(command, { signal, timeoutMs: 5 * 60_000, env });
}

/**
 * Starts merging `base` into the checked-out branch, without committing. Null when the branch
 * holds the base already. The base's commits are the mirror's, which the workspace borrows.
 */
export async function startMerge(
  ws: JobWorkspace,
  base: string,
  signal: AbortSignal,
): Promise<MergeStart | null> {
  const ref = `refs/heads/${validateBranchName(base)}^{commit}`;
  const baseSha = (await gitClient(ws.checkout.mirror).raw(["rev-parse", "--verify", ref])).trim();
  const contained = await inside(ws, `git merge-base --is-ancestor ${baseSha} HEAD`, signal);
  if (contained.exitCode === 0) return null;
  const merge = await inside(
    ws,
    `git -c core.hooksPath=/dev/null merge --no-ff --no-commit --no-verify ${baseSha}`,
    signal,
    // git wants an identity before it merges, even without committing; the sandbox has none.
    // finishMerge commits under the job's author.
    identity(VMPILOT_AUTHOR),
  );
  const unmerged = await inside(ws, "git diff --name-only --diff-filter=U -z", signal);
  const conflicts = unmerged.fullStdout.split("\0").filter(Boolean);
  if (merge.exitCode !== 0 && conflicts.length === 0) {
    throw new Error(`git merge failed: ${(merge.stderr || merge.stdout).trim()}`);
  }
  return { base, baseSha, conflicts };
}

export type MergeEnd = { pushed: true; sha: string } | { refused: string };

/**
 * Commits the merge the agent finished and pushes it: refused while a conflicted file still
 * holds a marker, or when the merge was abandoned. The push is a plain one, so it only ever
 * fast-forwards the branch.
 */
export async function finishMerge(input: {
  ws: JobWorkspace;
  merge: MergeStart;
  defaultBranch: string;
  token: string;
  author: CommitIdentity;
  signal: AbortSignal;
}): Promise<MergeEnd> {
  const { ws, merge, signal } = input;
  if (merge.conflicts.length > 0) {
    await ws.workspace.writeFile(CONFLICTS_FILE, merge.conflicts.join("\0"));
    const marked = await inside(
      ws,
      `xargs -0 grep -slE '${MARKER}' -- < ${CONFLICTS_FILE}`,
      signal,
    );
    const left = marked.fullStdout.split("\n").filter(Boolean);
    if (left.length > 0) return { refused: `conflict markers remain in ${left.join(", ")}` };
  }
  const branch = ws.checkout.branch;
  const commit = { message: `Merge ${merge.base} into ${branch}`, author: input.author };
  // Not commitInWorkspace, which commits nothing when the tree is HEAD's: a conflict resolved
  // wholly to this branch's side is still a merge, and the base must become a parent. Its exit
  // status is left to the check below (nothing to commit after an aborted merge, say).
  await ws.workspace.writeFile(MESSAGE_FILE, commit.message);
  await inside(
    ws,
    `git add -A && git -c core.hooksPath=/dev/null commit --quiet --no-verify -F ${MESSAGE_FILE}`,
    signal,
    identity(input.author),
  );
  const merged = await inside(ws, `git merge-base --is-ancestor ${merge.baseSha} HEAD`, signal);
  if (merged.exitCode !== 0) return { refused: `the merge of ${merge.base} was abandoned` };
  const published = await publishWorkspace({
    workspace: ws.workspace,
    mirror: ws.checkout.mirror,
    url: ws.checkout.url,
    auth: { token: input.token },
    baseSha: ws.from,
    branch,
    defaultBranch: input.defaultBranch,
    commit,
    signal,
  });
  return { pushed: true, sha: published.sha };
}
