import { isAbsolute, resolve } from "node:path";
import { isValidBranchName } from "../../github/branch-name.ts";
import { launchAndCollect } from "../process/launcher.ts";
import { programPath } from "../process/program.ts";

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

/** Settings given to git in its environment (GIT_CONFIG_COUNT), written to no config file. */
function configEnv(settings: readonly (readonly [string, string])[]): Record<string, string> {
  if (settings.length === 0) return {};
  const env: Record<string, string> = { GIT_CONFIG_COUNT: String(settings.length) };
  settings.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

function authHeader(auth: GitAuth): readonly [string, string] {
  const value =
    auth.scheme === "bearer"
      ? `Authorization: Bearer ${auth.token}`
      : `Authorization: Basic ${Buffer.from(`${auth.username ?? "x-access-token"}:${auth.token}`).toString("base64")}`;
  return ["http.extraHeader", value];
}

/** Git reads `http.extraHeader` from these variables; nothing is written to any config file. */
export function authEnv(auth: GitAuth | undefined): Record<string, string> {
  return auth ? configEnv([authHeader(auth)]) : {};
}

/**
 * No `git maintenance run --auto` or `gc --auto` after the worker's commands: each would start
 * processes of its own for every job, and mirrors are repacked on their own (mirror.ts), checkouts
 * thrown away.
 */
const NO_HOUSEKEEPING = [
  ["maintenance.auto", "false"],
  ["gc.auto", "0"],
] as const;

/** A git command that failed; the message carries git's own error output. */
class GitError extends Error {
  override name = "GitError";
}

export interface GitClient {
  /** Runs `git <args>` in the client's directory, `input` on stdin, and resolves to its stdout. */
  raw(args: readonly string[], input?: string): Promise<string>;
  /** The same with at most `maxBytes` of its stdout: past them git is stopped, and `cut`. */
  rawCapped(args: readonly string[], maxBytes: number): Promise<{ stdout: string; cut: boolean }>;
  /** The same with the file `path` on stdin (a shell opens it, then becomes git). */
  rawFrom(path: string, args: readonly string[]): Promise<string>;
}

function client(baseDir: string, env: Record<string, string>, lockFile?: string): GitClient {
  const run = async (
    args: readonly string[],
    started: { file: string; args: readonly string[] },
    input?: string,
    maxBytes?: number,
  ) => {
    const spec = { ...started, cwd: baseDir, env, group: false, input };
    const result = await launchAndCollect(spec, maxBytes);
    if (result.code === 0 || result.cut) return result;
    // `push --porcelain` reports rejections on stdout.
    const why =
      [result.stderr.trim(), result.stdout.trim()].filter(Boolean).join("\n") ||
      `exit code ${result.code ?? result.signal}`;
    const command = args.find((arg, i) => !arg.startsWith("-") && args[i - 1] !== "-c");
    throw new GitError(`git ${command ?? ""} failed: ${why}`);
  };
  const git = (args: readonly string[]) =>
    // flock(1) holds the lock for the command's lifetime, also against other worker processes;
    // it becomes git rather than waiting for it in a process of its own.
    lockFile
      ? { file: programPath("flock"), args: ["--no-fork", lockFile, programPath("git"), ...args] }
      : { file: programPath("git"), args };
  return {
    raw: async (args, input) => (await run(args, git(args), input)).stdout,
    async rawCapped(args, maxBytes) {
      const { stdout, cut } = await run(args, git(args), undefined, maxBytes);
      return { stdout, cut };
    },
    async rawFrom(path, args) {
      const script = 'file=$1; shift; exec "$@" <"$file"';
      const shell = [script, "git-input", path, programPath("git"), ...args];
      return (await run(args, { file: programPath("sh"), args: ["-c", ...shell] })).stdout;
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
  /** `env`: git's own variables (an index file, a commit's author), for this client only. */
  options: { lockFile?: string; env?: Record<string, string> } = {},
): GitClient {
  const env = {
    ...options.env,
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? "/",
    LANG: "C",
    GIT_TERMINAL_PROMPT: "0",
    ...configEnv([...NO_HOUSEKEEPING, ...(auth ? [authHeader(auth)] : [])]),
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
