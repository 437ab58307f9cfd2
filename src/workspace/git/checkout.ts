import { fallbackLogger, type Logger } from "../../log/logger.ts";
import { writeCheckout } from "./checkout-files.ts";
import { type GitAuth, validateBranchName } from "./git.ts";
import { defaultBranch, mirrorRefs, syncMirror } from "./mirror.ts";
import { claimSpare, refreshSpare, replenishSpare, targetRefs } from "./spares.ts";

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
  /** The clock a claimed spare's index is dated by (spares.ts). */
  now?: () => number;
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
  const { baseBranch: asked } = options;
  const [{ heads, tags }, defaultName] = await Promise.all([
    mirrorRefs(mirror),
    // Asked for a base, a job can do without knowing the default (origin/HEAD, the spare).
    asked === undefined ? defaultBranch(mirror) : defaultBranch(mirror).catch(() => asked),
  ]);
  const continued =
    options.existingBranch === "if-present"
      ? heads.has(options.branch)
      : options.existingBranch === true;
  const baseBranch = continued ? options.branch : (asked ?? defaultName);
  const sha = heads.get(baseBranch);
  if (sha === undefined) throw new Error(`${mirror.url} has no branch ${baseBranch}`);
  const target = {
    branch: options.branch,
    baseBranch,
    sha,
    heads,
    tags,
    defaultBranch: defaultName,
  };

  const fromSpare =
    options.keepSpare === true && (await claimSpare(options.dataDir, mirror, options.dest));
  if (fromSpare) await refreshSpare(options.dest, target, options.now?.());
  else
    await writeCheckout(options.dest, { mirror: mirror.path, url: mirror.url }, targetRefs(target));
  if (options.keepSpare) {
    replenishSpare(options.dataDir, mirror, target, logger, options.spareLimit);
  }

  return {
    root: options.dest,
    url: mirror.url,
    mirror: mirror.path,
    baseBranch,
    baseSha: sha,
    branch: options.branch,
    fromSpare,
    continued,
  };
}
