// A workspace's work as a git bundle, kept in the database so that whichever worker goes on
// rebuilds it: a chat-face workspace between turns (its commits since the checkout's base), and an
// agent run a job's attempt finished before anything of it was pushed (jobs/run/kept.ts: the run's
// commits and what it left uncommitted, as one commit that restoring undoes again).
// Both ends run inside the workspace: the agent may have planted hooks or filters in its .git.
import type { Workspace } from "../types.ts";
import { changedSince, commitIdentity, GIT, VMPILOT_AUTHOR } from "./commit.ts";

const FILE = ".git/vmpilot-turn.bundle";
/** The ref a run's work is bundled under: made for the bundle, gone after. */
const RUN_REF = "refs/vmpilot/kept";
/** The sandbox writes the bundle, so its size is checked before the worker reads it. */
const MAX_TURN_BUNDLE_BYTES = 50_000_000;
const SHA = /^[0-9a-f]{40}([0-9a-f]{24})?$/;

async function inside(
  workspace: Workspace,
  command: string,
  env?: Record<string, string>,
): Promise<string> {
  const result = await workspace.exec(command, { timeoutMs: 5 * 60_000, env });
  if (result.exitCode !== 0) {
    throw new Error(`${command.split(" && ").at(-1)} failed: ${result.stderr.trim()}`);
  }
  return result.fullStdout.trim();
}

/** The bundle a command just made, read (capped) and removed. */
async function takeBundle(workspace: Workspace): Promise<Buffer> {
  const bundle = await workspace.readFile(FILE, MAX_TURN_BUNDLE_BYTES);
  await inside(workspace, `rm -f ${FILE}`);
  return bundle;
}

/** The git that fetches `ref` of the bundle at FILE, into FETCH_HEAD. */
const fetchBundled = (ref: string) => `${GIT} fetch -q --no-tags ${FILE} ${ref}`;

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
  return { sha, bundle: await takeBundle(workspace) };
}

/** Puts the workspace where a saved turn left it: its commits, checked out, nothing else. */
export async function restoreTurnBundle(workspace: Workspace, bundle: Buffer): Promise<void> {
  await workspace.writeFile(FILE, bundle);
  await inside(
    workspace,
    `${fetchBundled("HEAD")} && ${GIT} reset -q --hard FETCH_HEAD && git clean -qfdx && rm -f ${FILE}`,
  );
}

function checkBase(baseSha: string): void {
  if (baseSha !== "" && !SHA.test(baseSha)) throw new Error(`bad base sha ${baseSha}`);
}

/**
 * A run's work since `baseSha` (HEAD when it began; "" in a repository without commits): HEAD with
 * what is not committed, a merge in progress included, as one commit on HEAD (and MERGE_HEAD), in
 * a bundle. Made with an index of its own, so the workspace stays as the run left it. Null when
 * the run changed nothing.
 */
export async function saveRunWork(workspace: Workspace, baseSha: string): Promise<Buffer | null> {
  checkBase(baseSha);
  if (!(await changedSince(workspace, baseSha))) return null;
  const script = [
    "set -e",
    `rm -f ${FILE}`,
    'index="$PWD/.git/vmpilot-kept.index"',
    'rm -f "$index"',
    'if [ -f .git/index ]; then cp .git/index "$index"; fi',
    `tree=$(GIT_INDEX_FILE="$index" ${GIT} add -A && GIT_INDEX_FILE="$index" ${GIT} write-tree)`,
    'rm -f "$index"',
    "parents=",
    `if head=$(${GIT} rev-parse -q --verify HEAD); then parents="-p $head"; fi`,
    `if merging=$(${GIT} rev-parse -q --verify MERGE_HEAD); then parents="$parents -p $merging"; fi`,
    `work=$(${GIT} commit-tree "$tree" $parents -m 'The run, kept')`,
    `${GIT} update-ref ${RUN_REF} "$work"`,
    `${GIT} bundle create -q ${FILE} ${RUN_REF}${baseSha ? ` ^${baseSha}` : ""}`,
    `${GIT} update-ref -d ${RUN_REF}`,
  ].join("\n");
  await inside(workspace, script, commitIdentity({ message: "", author: VMPILOT_AUTHOR }));
  return takeBundle(workspace);
}

/**
 * Where restoring a run's work left the workspace: `restored` (HEAD is the run's again, with what
 * it left uncommitted), `held` (HEAD already holds the work: the run's base, then commits whose
 * tree is the work's, as a push of it leaves the branch) or `moved` (HEAD is elsewhere; nothing
 * was changed).
 */
export type RunRestore = "restored" | "held" | "moved";

/**
 * Puts the workspace where the run saved by saveRunWork left it, when HEAD is the run's base or
 * `anyHead` says HEAD may be left (a branch the job creates, with nothing on it to lose).
 */
export async function restoreRunWork(
  workspace: Workspace,
  run: { bundle: Buffer; baseSha: string },
  anyHead: boolean,
): Promise<RunRestore> {
  checkBase(run.baseSha);
  await workspace.writeFile(FILE, run.bundle);
  const script = [
    "set -e",
    fetchBundled(RUN_REF),
    `rm -f ${FILE}`,
    `work=$(${GIT} rev-parse FETCH_HEAD)`,
    `head=$(${GIT} rev-parse -q --verify HEAD) || head=`,
    `if [ "$head" = '${run.baseSha}' ] || [ ${anyHead ? 1 : 0} = 1 ]; then`,
    `  ${GIT} reset -q --hard "$work"`,
    "  git clean -qfdx",
    // Undone again: the run's commits stay, what it left uncommitted is so once more.
    `  if parent=$(${GIT} rev-parse -q --verify "$work^1"); then ${GIT} reset -q "$parent"`,
    `  else ${GIT} update-ref -d HEAD && ${GIT} read-tree --empty; fi`,
    `  if merging=$(${GIT} rev-parse -q --verify "$work^2"); then ${GIT} update-ref MERGE_HEAD "$merging"; fi`,
    "  echo restored",
    `elif [ -n "$head" ] && [ "$(${GIT} rev-parse "HEAD^{tree}")" = "$(${GIT} rev-parse "$work^{tree}")" ] &&`,
    `  ${GIT} merge-base --is-ancestor '${run.baseSha}' HEAD; then`,
    "  echo held",
    "else",
    "  echo moved",
    "fi",
  ].join("\n");
  const said = (await inside(workspace, script)).split("\n").at(-1);
  if (said === "restored" || said === "held" || said === "moved") return said;
  throw new Error(`restoring the run's work printed ${String(said).slice(0, 80)}`);
}
