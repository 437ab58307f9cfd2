import { simpleGit } from "simple-git";

/**
 * Brings the committed branch from the job's checkout into the repository the user named. A
 * local repository fetches it (git's upload-pack is safe to run against the agent-written
 * checkout); a remote one gets it pushed from the mirror with the user's own git credentials,
 * since this is the user's machine and their command.
 */
export async function deliverBranch(options: {
  repoUrl: string;
  local: boolean;
  checkoutRoot: string;
  mirror: string;
  branch: string;
}): Promise<void> {
  const ref = `+refs/heads/${options.branch}:refs/heads/${options.branch}`;
  if (options.local) {
    await simpleGit(options.repoUrl).fetch([options.checkoutRoot, ref]);
    return;
  }
  await simpleGit(options.mirror).fetch([options.checkoutRoot, ref]);
  await simpleGit(options.mirror).push([options.repoUrl, `refs/heads/${options.branch}`]);
}
