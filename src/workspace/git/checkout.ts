import { fallbackLogger, type Logger } from "../../log/logger.ts";
import { type GitAuth, gitClient, validateBranchName } from "./git.ts";
import { defaultBranch, sharedClone, syncMirror } from "./mirror.ts";
import { claimSpare, refreshSpare, replenishSpare } from "./spares.ts";

export interface CheckoutOptions {
  /** The app's data directory; mirrors live in `<dataDir>/mirrors`. */
  dataDir: string;
  /** https URL, file:// URL or local path. Credentials in the URL are moved to `auth`. */
  repo: string;
  auth?: GitAuth;
  /** Where the checkout goes; must not exist yet. Same filesystem as dataDir to use spares. */
  dest: string;
  /** Default: the repository's default branch. */
  baseBranch?: string;
  /** The branch the job works on: a new one, made from baseBranch, unless existingBranch. */
  branch: string;
  /**
   * Continue `branch` as the remote has it instead of creating it (baseBranch is then unused).
   * `true`: it must exist on the remote; `"if-present"`: continue it when the remote has it.
   */
  existingBranch?: boolean | "if-present";
  /**
   * Keep a ready-made checkout of this repository in `<dataDir>/spares` for the next job (made
   * in the background). For long-running workers; off by default.
   */
  keepSpare?: boolean;
  /** With keepSpare: how many repositories keep a spare, most recently used first; default 20. */
  spareLimit?: number;
  logger?: Logger;
}

export interface Checkout {
  root: string;
  /** The repository URL without credentials; the checkout's `origin`. */
  url: string;
  mirror: string;
  baseBranch: string;
  baseSha: string;
  branch: string;
  /** True when a spare checkout was claimed instead of writing a new working tree. */
  fromSpare: boolean;
  /** True when `branch` was the remote's, continued rather than created. */
  continued: boolean;
}

/** The mirror's branches and the commits they point at. */
async function mirrorHeads(mirror: string): Promise<Map<string, string>> {
  const out = await gitClient(mirror).raw([
    "for-each-ref",
    "--format=%(objectname) %(refname:lstrip=2)",
    "refs/heads/",
  ]);
  const heads = new Map<string, string>();
  for (const line of out.split("\n")) {
    const [sha, name] = line.split(" ");
    if (sha && name) heads.set(name, sha);
  }
  return heads;
}

/**
 * Creates a new branch at HEAD and switches to it. The tree is the same, so only refs change:
 * `checkout -b` would rewrite the whole index for nothing.
 */
async function createBranch(root: string, name: string): Promise<void> {
  const git = gitClient(root);
  const ref = `refs/heads/${validateBranchName(name)}`;
  // The empty old value makes git refuse a branch that exists already.
  await git.raw(["update-ref", ref, "HEAD", ""]);
  await git.raw(["symbolic-ref", "HEAD", ref]);
}

/**
 * Makes a job's checkout: refresh the bare mirror, then either claim a spare checkout and move
 * it to the base branch's commit in the mirror, or clone the mirror with `--shared`; the job's
 * branch is created there (an existing branch is itself the base). Credentials are used for the
 * fetch only and written nowhere.
 */
export async function prepareCheckout(options: CheckoutOptions): Promise<Checkout> {
  validateBranchName(options.branch);
  if (options.baseBranch !== undefined) validateBranchName(options.baseBranch);
  const logger = options.logger ?? fallbackLogger();
  const mirror = await syncMirror(options.dataDir, options.repo, options.auth, logger);
  const [heads, defaultName] = await Promise.all([
    mirrorHeads(mirror.path),
    options.baseBranch ?? defaultBranch(mirror),
  ]);
  const continued =
    options.existingBranch === "if-present"
      ? heads.has(options.branch)
      : options.existingBranch === true;
  const baseBranch = continued ? options.branch : defaultName;
  const sha = heads.get(baseBranch);
  if (sha === undefined) throw new Error(`${mirror.url} has no branch ${baseBranch}`);

  const fromSpare =
    options.keepSpare === true && (await claimSpare(options.dataDir, mirror, options.dest));
  let baseSha = sha;
  if (fromSpare) {
    await refreshSpare(options.dest, { branch: options.branch, baseBranch, sha, heads });
  } else {
    await sharedClone(mirror, options.dest, baseBranch);
    if (!continued) await createBranch(options.dest, options.branch);
    // Another job's fetch may have moved the mirror since its branches were read.
    baseSha = (await gitClient(options.dest).raw(["rev-parse", "HEAD"])).trim();
  }
  if (options.keepSpare) {
    replenishSpare(options.dataDir, mirror, logger, options.spareLimit);
  }

  return {
    root: options.dest,
    url: mirror.url,
    mirror: mirror.path,
    baseBranch,
    baseSha,
    branch: options.branch,
    fromSpare,
    continued,
  };
}
