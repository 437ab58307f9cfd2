import { type GitAuth, gitClient, validateBranchName } from "./git.ts";
import { syncMirror } from "./mirror.ts";

export interface CheckoutOptions {
  /** The app's data directory; mirrors live in `<dataDir>/mirrors`. */
  dataDir: string;
  /** https URL, file:// URL or local path. Credentials in the URL are moved to `auth`. */
  repo: string;
  auth?: GitAuth;
  /** Where the checkout goes; must not exist yet. */
  dest: string;
  /** Default: the repository's default branch. */
  baseBranch?: string;
  /** The new branch the job works on. */
  branch: string;
}

export interface Checkout {
  root: string;
  /** The repository URL without credentials; the checkout's `origin`. */
  url: string;
  mirror: string;
  baseBranch: string;
  baseSha: string;
  branch: string;
}

/** Creates and switches to a new branch in a checkout. */
export async function createBranch(root: string, name: string): Promise<void> {
  await gitClient(root).checkoutLocalBranch(validateBranchName(name));
}

/**
 * Makes a job's checkout from the warm mirror: refresh the mirror, clone it with `--shared`
 * (objects are borrowed through `objects/info/alternates`, not copied), point `origin` at the
 * clean repository URL, and create the job's branch. No credential is written anywhere.
 */
export async function prepareCheckout(options: CheckoutOptions): Promise<Checkout> {
  validateBranchName(options.branch);
  if (options.baseBranch !== undefined) validateBranchName(options.baseBranch);
  const mirror = await syncMirror(options.dataDir, options.repo, options.auth);
  const baseBranch =
    options.baseBranch ??
    (await gitClient(mirror.path).raw(["symbolic-ref", "--short", "HEAD"])).trim();

  await gitClient(mirror.path).clone(mirror.path, options.dest, [
    "--shared",
    "--branch",
    baseBranch,
  ]);
  const git = gitClient(options.dest);
  await git.remote(["set-url", "origin", mirror.url]);
  await createBranch(options.dest, options.branch);
  const baseSha = (await git.revparse(["HEAD"])).trim();
  return {
    root: options.dest,
    url: mirror.url,
    mirror: mirror.path,
    baseBranch,
    baseSha,
    branch: options.branch,
  };
}
