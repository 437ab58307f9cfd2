// A chat-face workspace between turns: its commits since the checkout's base as a git bundle, kept
// in the database, so whichever worker takes the next turn (or goes back to this one) rebuilds it.
// Both ends run inside the workspace: the agent may have planted hooks or filters in its .git.
import type { Workspace } from "../types.ts";
import { GIT } from "./commit.ts";

const FILE = ".git/vmpilot-turn.bundle";
/** The sandbox writes the bundle, so its size is checked before the worker reads it. */
const MAX_TURN_BUNDLE_BYTES = 50_000_000;
const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

async function inside(workspace: Workspace, command: string): Promise<string> {
  const result = await workspace.exec(command, { timeoutMs: 5 * 60_000 });
  if (result.exitCode !== 0) {
    throw new Error(`${command.split(" && ").at(-1)} failed: ${result.stderr.trim()}`);
  }
  return result.fullStdout.trim();
}

/**
 * The commits since `baseSha` (all of them when null, for a repository that started empty), or
 * null when there are none.
 */
export async function saveTurnBundle(
  workspace: Workspace,
  baseSha: string | null,
): Promise<{ sha: string; bundle: Buffer } | null> {
  if (baseSha !== null && !SHA.test(baseSha)) throw new Error(`bad base sha ${baseSha}`);
  const head = await workspace.exec("git rev-parse --verify -q HEAD");
  const sha = head.stdout.trim();
  if (head.exitCode !== 0 || sha === baseSha) return null;
  if (!SHA.test(sha)) throw new Error(`git rev-parse printed ${sha.slice(0, 80)}`);
  const range = baseSha === null ? "HEAD" : `HEAD ^${baseSha}`;
  await inside(workspace, `rm -f ${FILE} && ${GIT} bundle create -q ${FILE} ${range}`);
  const bundle = await workspace.readFile(FILE, MAX_TURN_BUNDLE_BYTES);
  await inside(workspace, `rm -f ${FILE}`);
  return { sha, bundle };
}

/** Puts the workspace where a saved turn left it: its commits, checked out, nothing else. */
export async function restoreTurnBundle(workspace: Workspace, bundle: Buffer): Promise<void> {
  await workspace.writeFile(FILE, bundle);
  await inside(
    workspace,
    `${GIT} fetch -q --no-tags ${FILE} HEAD && ${GIT} reset -q --hard FETCH_HEAD && git clean -qfdx && rm -f ${FILE}`,
  );
}
