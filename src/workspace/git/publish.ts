// Commit and push without trusting the checkout. The agent controls everything in it, `.git`
// included: config (fsmonitor, filters), hooks, refs and alternates. So the worker never runs git
// in the checkout. The commit and a bundle of the new commits are made inside the workspace
// (where the agent's commands run anyway); the worker only reads that bundle as data into the
// mirror, and pushes from the mirror with the token in the push command's environment.
//
// Why a bundle rather than `git fetch <checkout>`: fetching runs upload-pack on the checkout's
// `.git`, which follows its symlinked refs and its alternates with the worker's rights. A planted
// `packed-refs -> <another mirror>/packed-refs` plus an alternate to that mirror's objects would
// push another repository's history here. Inside the sandbox those paths do not exist.

import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PermanentError } from "../../errors.ts";
import { BRANCH_PREFIX } from "../../github/branch-name.ts";
import type { ChangedFile } from "../../github/pull-request.ts";
import type { Workspace } from "../types.ts";
import { type CommitOptions, commitInWorkspace } from "./commit.ts";
import { type GitAuth, gitClient, validateBranchName } from "./git.ts";

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
  /** The remote URL, without credentials. */
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

const BUNDLE = ".git/vmpilot-publish.bundle";
/** The sandbox writes the bundle, so its size is checked before the worker copies it out. */
export const MAX_BUNDLE_BYTES = 500_000_000;
const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

async function inside(workspace: Workspace, command: string, signal?: AbortSignal) {
  const result = await workspace.exec(command, { signal, timeoutMs: 5 * 60_000 });
  if (result.exitCode !== 0) {
    throw new Error(`${command.split(" ").slice(0, 3).join(" ")} failed: ${result.stderr.trim()}`);
  }
  return result.fullStdout.trim();
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
 * Writes the commits since `baseSha` to a bundle file in a fresh temporary directory of the
 * worker's, made inside the workspace and read through its containment check. Resolves to null
 * when HEAD is still the base. The caller removes `dir`.
 */
export async function bundleWorkspaceCommits(
  workspace: Workspace,
  baseSha: string,
  signal?: AbortSignal,
): Promise<{ sha: string; file: string; dir: string } | null> {
  if (!SHA.test(baseSha)) throw new Error(`bad base sha ${baseSha}`);
  const sha = await inside(workspace, "git rev-parse HEAD", signal);
  if (sha === baseSha) return null;
  await inside(
    workspace,
    `rm -f ${BUNDLE} && git bundle create -q ${BUNDLE} HEAD ^${baseSha}`,
    signal,
  );
  const dir = await mkdtemp(join(tmpdir(), "vmpilot-publish-"));
  const file = join(dir, "work.bundle");
  try {
    await workspace.copyOut(BUNDLE, file, MAX_BUNDLE_BYTES);
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return { sha, file, dir };
}

export async function publishWorkspace(options: PublishOptions): Promise<PublishResult> {
  assertPushAllowed(options);
  const { workspace, signal } = options;
  await commitInWorkspace(workspace, options.commit);
  const bundle = await bundleWorkspaceCommits(workspace, options.baseSha, signal);
  if (!bundle) return { pushed: false, sha: options.baseSha, files: [] };
  const ref = `refs/vmpilot/publish/${randomUUID()}`;
  const mirror = gitClient(options.mirror);
  try {
    await mirror.raw(["fetch", "--no-write-fetch-head", "--no-tags", bundle.file, `+HEAD:${ref}`]);
    const sha = (await mirror.raw(["rev-parse", ref])).trim();
    const base = `refs/heads/${validateBranchName(options.defaultBranch)}`;
    const files = parseNameStatus(
      await mirror.raw(["diff", "--name-status", "-z", "--no-renames", `${base}...${sha}`]),
    );
    signal?.throwIfAborted();
    const lease =
      options.lease === undefined
        ? []
        : [`--force-with-lease=refs/heads/${options.branch}:${options.lease ?? ""}`];
    await gitClient(options.mirror, options.auth).raw([
      "-c",
      "http.followRedirects=false",
      "push",
      "--porcelain",
      ...lease,
      options.url,
      `${sha}:refs/heads/${options.branch}`,
    ]);
    return { pushed: true, sha, files };
  } finally {
    await mirror.raw(["update-ref", "-d", ref]).catch(() => undefined);
    await rm(bundle.dir, { recursive: true, force: true });
  }
}
