import { isAbsolute, resolve } from "node:path";
import { type SimpleGit, simpleGit } from "simple-git";
import { isValidBranchName } from "../github/branch-name.ts";

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

const ALLOWED_GIT_ENV = [
  "GIT_CONFIG_COUNT",
  "GIT_CONFIG_KEY_0",
  "GIT_CONFIG_VALUE_0",
  "GIT_TERMINAL_PROMPT",
];

/**
 * simple-git for the worker's own git commands, with a minimal environment: the worker's secrets
 * stay out of git's environment, and credentials (if any) are added for this client only.
 */
export function gitClient(baseDir: string, auth?: GitAuth): SimpleGit {
  return simpleGit({
    baseDir,
    allowEnvironment: ALLOWED_GIT_ENV,
    // Needed for GIT_CONFIG_COUNT, which is how credentials stay out of config files.
    unsafe: { allowUnsafeConfigEnvCount: true },
  }).env({
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? "/",
    LANG: "C",
    GIT_TERMINAL_PROMPT: "0",
    ...authEnv(auth),
  });
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
