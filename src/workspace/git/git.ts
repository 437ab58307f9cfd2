import { isAbsolute, resolve } from "node:path";
import { isValidBranchName } from "../../github/branch-name.ts";
import { launchAndCollect } from "../process/launcher.ts";

/** Credentials for one clone or fetch. They travel in the environment of that command only. */
export interface GitAuth {
  token: string;
  /** "basic" (default) sends `username:token`, as GitHub expects for installation tokens. */
  scheme?: "basic" | "bearer";
  /** Default "x-access-token". */
  username?: string;
}

/**
 * Splits credentials out of a repository URL (`https://user:token@host/...`), so only the clean
 * URL is ever written to disk. Local paths become absolute.
 */
export function cleanRepoUrl(repo: string): { url: string; auth?: GitAuth } {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(repo)) {
    // scp-like `git@host:path` stays as it is; anything else is a local path.
    if (/^[^/]+@[^/:]+:/.test(repo)) return { url: repo };
    return { url: isAbsolute(repo) ? repo : resolve(repo) };
  }
  const url = new URL(repo);
  if (!url.password) {
    if (url.protocol === "https:" || url.protocol === "http:") url.username = "";
    return { url: url.toString() };
  }
  const auth: GitAuth = {
    token: decodeURIComponent(url.password),
    username: decodeURIComponent(url.username) || undefined,
  };
  url.username = "";
  url.password = "";
  return { url: url.toString(), auth };
}

/** Git reads `http.extraHeader` from these variables; nothing is written to any config file. */
export function authEnv(auth: GitAuth | undefined): Record<string, string> {
  if (!auth) return {};
  const value =
    auth.scheme === "bearer"
      ? `Authorization: Bearer ${auth.token}`
      : `Authorization: Basic ${Buffer.from(`${auth.username ?? "x-access-token"}:${auth.token}`).toString("base64")}`;
  return {
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "http.extraHeader",
    GIT_CONFIG_VALUE_0: value,
  };
}

/** A git command that failed; the message carries git's own error output. */
class GitError extends Error {
  override name = "GitError";
}

export interface GitClient {
  /** Runs `git <args>` in the client's directory, `input` on stdin, and resolves to its stdout. */
  raw(args: readonly string[], input?: string): Promise<string>;
}

function client(baseDir: string, env: Record<string, string>, lockFile?: string): GitClient {
  return {
    async raw(args, input) {
      // flock(1) holds the lock for the command's lifetime, also against other worker processes.
      const locked = lockFile ? { file: "flock", args: [lockFile, "git", ...args] } : undefined;
      const spec = { file: "git", args, cwd: baseDir, env, group: false, input, ...locked };
      const result = await launchAndCollect(spec);
      if (result.code === 0) return result.stdout;
      // `push --porcelain` reports rejections on stdout.
      const why =
        [result.stderr.trim(), result.stdout.trim()].filter(Boolean).join("\n") ||
        `exit code ${result.code ?? result.signal}`;
      const command = args.find((arg, i) => !arg.startsWith("-") && args[i - 1] !== "-c");
      throw new GitError(`git ${command ?? ""} failed: ${why}`);
    },
  };
}

/**
 * Git for the worker's own commands, with a minimal environment: the worker's secrets stay out of
 * git's environment, and credentials (if any) are added for this client only.
 */
export function gitClient(
  baseDir: string,
  auth?: GitAuth,
  options: { lockFile?: string } = {},
): GitClient {
  const env = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? "/",
    LANG: "C",
    GIT_TERMINAL_PROMPT: "0",
    ...authEnv(auth),
  };
  return client(baseDir, env, options.lockFile);
}

/** Git as the user would run it, with their environment and credentials: for the CLI only. */
export function userGitClient(baseDir: string): GitClient {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      (entry): entry is [string, string] => entry[1] !== undefined,
    ),
  );
  return client(baseDir, env);
}

/**
 * Branch names come from issue titles and users; only a conservative character set is accepted,
 * on top of git's own rules, so a name can never be read as an option or a path trick.
 */
export function validateBranchName(name: string): string {
  if (!isValidBranchName(name)) {
    throw new Error(
      `Invalid branch name ${JSON.stringify(name)}: use letters, digits, ".", "_", "-" and "/"`,
    );
  }
  return name;
}
