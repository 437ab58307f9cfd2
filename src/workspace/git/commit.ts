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
function quote(text: string): string {
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
 * Commits everything the agent changed. It runs inside the workspace on purpose: the agent could
 * have planted hooks, filters or an fsmonitor in `.git/config`, and those must execute where the
 * agent's own commands do, never in the worker next to its secrets. Resolves to null when there
 * is nothing to commit.
 */
export async function commitInWorkspace(
  workspace: Workspace,
  options: CommitOptions,
): Promise<CommitResult | null> {
  const trailers = (options.coAuthors ?? []).map(
    (who) => `Co-authored-by: ${who.name} <${who.email}>`,
  );
  const message = withoutNul(
    [options.message.trim(), trailers.join("\n")].filter(Boolean).join("\n\n"),
  );
  const name = withoutNul(options.author.name);
  const email = withoutNul(options.author.email);
  const identity = {
    GIT_AUTHOR_NAME: name,
    GIT_AUTHOR_EMAIL: email,
    GIT_COMMITTER_NAME: name,
    GIT_COMMITTER_EMAIL: email,
  };
  const staged = await workspace.exec("git add -A && git diff --cached --name-only -z", {
    env: identity,
  });
  if (staged.exitCode !== 0) throw new Error(`git add failed: ${staged.stderr.trim()}`);
  const files = staged.fullStdout.split("\0").filter(Boolean);
  if (files.length === 0) return null;

  const commit = await workspace.exec(
    `git -c core.hooksPath=/dev/null commit --quiet --no-verify -m ${quote(message)} && git rev-parse HEAD`,
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
 * for the reason commitInWorkspace does; a git that cannot tell counts as a change.
 */
export async function changedSince(workspace: Workspace, start: string): Promise<boolean> {
  if ((await headOf(workspace)) !== start) return true;
  const status = await workspace.exec("git status --porcelain");
  return status.exitCode !== 0 || status.fullStdout.trim() !== "";
}
