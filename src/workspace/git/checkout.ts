import { basename, dirname } from "node:path";
import { fallbackLogger, type Logger } from "../../log/logger.ts";
import { mountScratchDisk, type ScratchDisk } from "../sandbox/scratch-disk.ts";
import { writeCheckout } from "./checkout-files.ts";
import { type GitAuth, validateBranchName } from "./git.ts";
import { defaultBranch, fetchPullHead, mirrorRefs, syncMirror } from "./mirror.ts";
import {
  claimSpare,
  claimSpareDisk,
  refreshSpare,
  replenishSpare,
  SPARE_TREE,
  targetRefs,
} from "./spares.ts";

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
   * Start `branch` at this pull request's head, fetched from the repository's
   * `refs/pull/<n>/head`: a fork's commits, which no branch here holds (baseBranch is then unused).
   */
  pullRequest?: number;
  /**
   * Keep a ready-made checkout of this repository in `<dataDir>/spares` for the next job (made
   * in the background). For long-running workers; off by default.
   */
  keepSpare?: boolean;
  /** With keepSpare: how many repositories keep a spare, most recently used first; default 20. */
  spareLimit?: number;
  /** The clock a claimed spare's index is dated by (spares.ts). */
  now?: () => number;
  /**
   * Makes the checkout on a job's disk of this size (sandbox.ts), mounted over the directory
   * `dest` goes in, which must be empty: a spare's when one is ready, else a new one. `dest` must
   * then be that directory's `repo`.
   */
  diskMb?: number;
  logger?: Logger;
}

export interface Checkout {
  root: string;
  /** The repository URL without credentials; the checkout's `origin`. */
  url: string;
  mirror: string;
  /** The branch the work starts from: the job's own when it was continued. */
  baseBranch: string;
  /** The repository's default branch, where a continued branch's pull request goes. */
  defaultBranch: string;
  baseSha: string;
  branch: string;
  /** True when a spare checkout was claimed instead of writing a new working tree. */
  fromSpare: boolean;
  /** True when `branch` was the remote's, continued rather than created. */
  continued: boolean;
  /** With diskMb: the disk the checkout is on, for the workspace; its opener unmounts it. */
  disk?: ScratchDisk;
}

/**
 * Makes a job's checkout: refresh the bare mirror, then either claim a spare checkout and move
 * it to the base branch's commit in the mirror, or write a checkout that borrows the mirror's
 * objects (checkout-files.ts); the job's branch is created there (an existing branch is itself
 * the base). Credentials are used for the fetch only and written nowhere.
 */
export async function prepareCheckout(options: CheckoutOptions): Promise<Checkout> {
  validateBranchName(options.branch);
  if (options.baseBranch !== undefined) validateBranchName(options.baseBranch);
  const logger = options.logger ?? fallbackLogger();
  const mirror = await syncMirror(options.dataDir, options.repo, options.auth, logger);
  const { baseBranch: asked, pullRequest } = options;
  const [{ heads, tags }, defaultName, pullHead] = await Promise.all([
    mirrorRefs(mirror),
    // Asked for a base, a job can do without knowing the default (origin/HEAD, the spare).
    asked === undefined ? defaultBranch(mirror) : defaultBranch(mirror).catch(() => asked),
    pullRequest === undefined ? undefined : fetchPullHead(mirror, pullRequest, options.auth),
  ]);
  const continued =
    pullHead === undefined &&
    (options.existingBranch === "if-present"
      ? heads.has(options.branch)
      : options.existingBranch === true);
  // A pull request's head is the branch's own start, as a continued branch is.
  const baseBranch = continued || pullHead ? options.branch : (asked ?? defaultName);
  const sha = pullHead ?? heads.get(baseBranch);
  if (sha === undefined) throw new Error(`${mirror.url} has no branch ${baseBranch}`);
  const target = {
    branch: options.branch,
    baseBranch,
    sha,
    heads,
    tags,
    defaultBranch: defaultName,
  };

  const { dataDir, dest, diskMb, keepSpare = false } = options;
  let disk: ScratchDisk | undefined;
  let fromSpare: boolean;
  if (diskMb === undefined) fromSpare = keepSpare && (await claimSpare(dataDir, mirror, dest));
  else {
    if (basename(dest) !== SPARE_TREE)
      throw new Error(`a checkout on a disk goes in ${SPARE_TREE}`);
    disk = keepSpare ? await claimSpareDisk(dataDir, mirror, dirname(dest), diskMb) : undefined;
    fromSpare = disk !== undefined;
    disk ??= await mountScratchDisk(dirname(dest), diskMb);
  }
  try {
    if (fromSpare) await refreshSpare(dest, target, options.now?.());
    else await writeCheckout(dest, { mirror: mirror.path, url: mirror.url }, targetRefs(target));
  } catch (error) {
    await disk?.unmount();
    throw error;
  }
  if (keepSpare) replenishSpare(dataDir, mirror, target, logger, options.spareLimit, diskMb);

  return {
    root: dest,
    url: mirror.url,
    mirror: mirror.path,
    baseBranch,
    defaultBranch: defaultName,
    baseSha: sha,
    branch: options.branch,
    fromSpare,
    continued,
    ...(disk && { disk }),
  };
}
