// Commit and push without trusting the checkout. The agent controls everything in it, `.git`
// included: config (fsmonitor, filters), hooks, refs and alternates. So the worker never runs git
// in the checkout. The commit and a pack of the new commits are made inside the workspace
// (where the agent's commands run anyway, transfer.ts); the worker only reads that pack as data
// into the mirror, and pushes from the mirror with the token in the push command's environment.
//
// Why a pack rather than `git fetch <checkout>`: fetching runs upload-pack on the checkout's
// `.git`, which follows its symlinked refs and its alternates with the worker's rights. A planted
// `packed-refs -> <another mirror>/packed-refs` plus an alternate to that mirror's objects would
// push another repository's history here. Inside the sandbox those paths do not exist.

import { PermanentError } from "../../errors.ts";
import { BRANCH_PREFIX } from "../../github/branch-name.ts";
import type { ChangedFile } from "../../github/pull-request.ts";
import { inSpan } from "../../log/trace.ts";
import type { Workspace } from "../types.ts";
import type { CommitOptions } from "./commit.ts";
import { type GitAuth, gitClient, validateBranchName } from "./git.ts";
import { takeWorkspaceCommits } from "./transfer.ts";

// The CLI takes the commits as a bundle (src/cli/deliver.ts).
export { bundleWorkspaceCommits, MAX_BUNDLE_BYTES } from "./transfer.ts";

export interface PushTarget {
  branch: string;
  /** Never pushed to, whatever else says so. */
  defaultBranch: string;
  /** The pull request head branch this job serves; may be pushed without the vmpilot/ prefix. */
  servedBranch?: string;
}

export class PushRefused extends PermanentError {
  override name = "PushRefused";
}

/** The push guard: vmpilot/* branches, or the pull request branch being served; never the default. */
export function assertPushAllowed(target: PushTarget): void {
  try {
    validateBranchName(target.branch);
  } catch (error) {
    throw new PushRefused((error as Error).message);
  }
  if (target.branch === target.defaultBranch) {
    throw new PushRefused(`Refusing to push to the default branch ${target.defaultBranch}`);
  }
  if (!target.branch.startsWith(BRANCH_PREFIX) && target.branch !== target.servedBranch) {
    throw new PushRefused(
      `Refusing to push to ${target.branch}: only ${BRANCH_PREFIX}* branches or the pull request branch being served`,
    );
  }
}

export interface PublishOptions extends PushTarget {
  workspace: Workspace;
  /** The bare mirror the checkout was made from (trusted: only the worker writes it). */
  mirror: string;
  /** The remote URL, without credentials: the mirror's origin. */
  url: string;
  auth: GitAuth;
  /** The commit the checkout started from. */
  baseSha: string;
  commit: CommitOptions;
  /**
   * What the remote branch may be replaced from: its sha, or null when it must not exist yet.
   * Undefined allows fast-forwards only (someone else's pull request branch).
   */
  lease?: string | null;
  signal?: AbortSignal;
}

export interface PublishResult {
  /** False when the work left no commits to push. */
  pushed: boolean;
  sha: string;
  /** Against the default branch, as the pull request will show them. */
  files: ChangedFile[];
}

/** `git diff --name-status -z --no-renames`: status and path alternate. */
function parseNameStatus(output: string): ChangedFile[] {
  const fields = output.split("\0").filter(Boolean);
  const files: ChangedFile[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    files.push({ status: fields[i] as string, path: fields[i + 1] as string });
  }
  return files;
}

/**
 * Pushes `sha` (in the mirror) to `branch`, the push guard's way: from the mirror's origin to `url`
 * only, so git records the branch in the mirror as a fetch would, and the next job's fetch has
 * nothing new of ours to bring and check. `lease` as in PublishOptions.
 */
export async function pushCommit(
  options: PushTarget &
    Pick<PublishOptions, "mirror" | "url" | "auth" | "lease"> & {
      sha: string;
    },
): Promise<void> {
  assertPushAllowed(options);
  const lease =
    options.lease === undefined
      ? []
      : [`--force-with-lease=refs/heads/${options.branch}:${options.lease ?? ""}`];
  await gitClient(options.mirror, options.auth).raw([
    "-c",
    "http.followRedirects=false",
    "-c",
    `remote.origin.pushurl=${options.url}`,
    "push",
    "--porcelain",
    ...lease,
    "origin",
    `${options.sha}:refs/heads/${options.branch}`,
  ]);
}

/** Pushes the workspace's commits, as the span `git push` of the job's trace. */
export function publishWorkspace(options: PublishOptions): Promise<PublishResult> {
  return inSpan("git push", {}, async (span) => {
    const published = await publish(options);
    span.setAttributes({
      "vmpilot.push.pushed": published.pushed,
      "vmpilot.push.files": published.files.length,
    });
    return published;
  });
}

async function publish(options: PublishOptions): Promise<PublishResult> {
  assertPushAllowed(options);
  const { signal } = options;
  const sha = await takeWorkspaceCommits(
    options.workspace,
    options.mirror,
    options.baseSha,
    options.commit,
    signal,
  );
  if (sha === null) return { pushed: false, sha: options.baseSha, files: [] };
  const base = `refs/heads/${validateBranchName(options.defaultBranch)}`;
  const files = parseNameStatus(
    await gitClient(options.mirror).raw([
      "diff",
      "--name-status",
      "-z",
      "--no-renames",
      `${base}...${sha}`,
    ]),
  );
  signal?.throwIfAborted();
  await pushCommit({ ...options, sha });
  return { pushed: true, sha, files };
}
