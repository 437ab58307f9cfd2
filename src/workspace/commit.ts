import type { Workspace } from "./types.ts";

export interface CommitIdentity {
  name: string;
  email: string;
}

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
  const message = [options.message.trim(), trailers.join("\n")].filter(Boolean).join("\n\n");
  const identity = {
    GIT_AUTHOR_NAME: options.author.name,
    GIT_AUTHOR_EMAIL: options.author.email,
    GIT_COMMITTER_NAME: options.author.name,
    GIT_COMMITTER_EMAIL: options.author.email,
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
