import type { Workspace } from "../types.ts";

export interface CommitIdentity {
  name: string;
  email: string;
}

/** Who commits where no GitHub App identity applies (the CLI, chat-face turns). */
export const VMPILOT_AUTHOR: CommitIdentity = {
  name: "vmpilot",
  email: "vmpilot@users.noreply.github.com",
};

export interface CommitOptions {
  message: string;
  author: CommitIdentity;
  /** Added as `Co-authored-by:` trailers, e.g. the person who asked for the change. */
  coAuthors?: readonly CommitIdentity[];
}

export interface CommitResult {
  sha: string;
  /** Paths changed by the commit, relative to the repository root. */
  files: string[];
}

/** Single quotes for bash, so identities and messages reach git as single arguments. */
export function quote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * Drops NUL bytes: git keeps none in a message or an identity, and a command line cannot carry
 * one, so a title the agent or an issue supplied with a NUL would otherwise fail the whole commit.
 */
function withoutNul(text: string): string {
  return text.replaceAll("\0", "");
}

/**
 * Git as the worker runs it inside the workspace: with no `maintenance run --auto` or `gc --auto`
 * after it, processes of their own for nothing the job needs.
 */
export const GIT = "git -c maintenance.auto=false -c gc.auto=0";

/** The commit message with its co-author trailers, as git keeps it. */
export function commitMessage(options: CommitOptions): string {
  const trailers = (options.coAuthors ?? []).map(
    (who) => `Co-authored-by: ${who.name} <${who.email}>`,
  );
  return withoutNul([options.message.trim(), trailers.join("\n")].filter(Boolean).join("\n\n"));
}

/** Author and committer, for the commit's environment. */
export function commitIdentity(options: CommitOptions): Record<string, string> {
  const name = withoutNul(options.author.name);
  const email = withoutNul(options.author.email);
  return {
    GIT_AUTHOR_NAME: name,
    GIT_AUTHOR_EMAIL: email,
    GIT_COMMITTER_NAME: name,
    GIT_COMMITTER_EMAIL: email,
  };
}

/**
 * Commits everything the agent changed. It runs inside the workspace on purpose: the agent could
 * have planted hooks, filters or an fsmonitor in `.git/config`, and those must execute where the
 * agent's own commands do, never in the worker next to its secrets. Resolves to null when there
 * is nothing to commit.
 */
export async function commitInWorkspace(
  workspace: Workspace,
  options: CommitOptions,
): Promise<CommitResult | null> {
  const identity = commitIdentity(options);
  const staged = await workspace.exec(`${GIT} add -A && ${GIT} diff --cached --name-only -z`, {
    env: identity,
  });
  if (staged.exitCode !== 0) throw new Error(`git add failed: ${staged.stderr.trim()}`);
  const files = staged.fullStdout.split("\0").filter(Boolean);
  if (files.length === 0) return null;

  const commit = await workspace.exec(
    `${GIT} -c core.hooksPath=/dev/null commit --quiet --no-verify -m ${quote(commitMessage(options))} && ${GIT} rev-parse HEAD`,
    { env: identity },
  );
  if (commit.exitCode !== 0) {
    throw new Error(`git commit failed: ${(commit.stderr || commit.stdout).trim()}`);
  }
  return { sha: commit.stdout.trim().split("\n").at(-1) ?? "", files };
}

/** HEAD's commit in the workspace, or "" in a repository with no commit yet. */
export async function headOf(workspace: Workspace): Promise<string> {
  const head = await workspace.exec("git rev-parse --verify -q HEAD");
  return head.exitCode === 0 ? head.stdout.trim() : "";
}

/**
 * Whether the workspace holds work since `start`, the commit it began at: files differ from HEAD
 * (untracked ones too), or HEAD moved because the agent committed itself. Runs inside the workspace
 * for the reason commitInWorkspace does, one git that says both; a git that cannot tell counts as
 * a change.
 */
export async function changedSince(workspace: Workspace, start: string): Promise<boolean> {
  const status = await workspace.exec(`${GIT} status --porcelain=v2 --branch`);
  if (status.exitCode !== 0) return true;
  const lines = status.fullStdout.split("\n").filter(Boolean);
  const head = lines.find((line) => line.startsWith("# branch.oid "))?.slice(13);
  // A repository without commits says "(initial)", where HEAD is "".
  if ((head === "(initial)" ? "" : head) !== start) return true;
  return lines.some((line) => !line.startsWith("# "));
}
