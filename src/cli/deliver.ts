import { rm } from "node:fs/promises";
import { userGitClient } from "../workspace/git/git.ts";
import { bundleWorkspaceCommits } from "../workspace/git/publish.ts";
import type { Workspace } from "../workspace/types.ts";

/**
 * Brings the committed branch from the job's checkout into the repository the user named. The
 * commits travel as a bundle made inside the workspace, never by fetching from the agent-written
 * checkout (whose planted refs and alternates could drag in another repository's history). A
 * remote repository gets the branch pushed from the mirror with the user's own git credentials,
 * since this is the user's machine and their command.
 */
export async function deliverBranch(options: {
  workspace: Workspace;
  baseSha: string;
  repoUrl: string;
  local: boolean;
  mirror: string;
  branch: string;
}): Promise<void> {
  const bundle = await bundleWorkspaceCommits(options.workspace, options.baseSha);
  if (!bundle) return;
  const ref = `HEAD:refs/heads/${options.branch}`;
  try {
    if (options.local) {
      // Not forced: the turn's commits descend from the branch as it was; if it has moved since
      // (the user committed to it), git refuses rather than dropping the user's commits.
      await userGitClient(options.repoUrl).raw(["fetch", bundle.file, ref]);
      return;
    }
    const mirror = userGitClient(options.mirror);
    await mirror.raw(["fetch", bundle.file, `+${ref}`]);
    await mirror.raw(["push", options.repoUrl, `refs/heads/${options.branch}`]);
  } finally {
    await rm(bundle.dir, { recursive: true, force: true });
  }
}
