// GitHub as seen by the signed-in user: every permission the web pages rely on is asked here,
// with the user's own token, never taken from the browser. Octokit brings retries, throttling and
// pagination; every answer is parsed before use.
import { ProbotOctokit } from "probot";
import { z } from "zod";
import { parseAnswer } from "../github/answer.ts";
import { loadRepoConfig, type RepoConfigLoad, readRepoFile } from "../github/repo-config-loader.ts";
import { githubStatus } from "../github/request-status.ts";
import type { InstallationGrant } from "./installation-permissions.ts";

export interface GitHubUser {
  login: string;
  id: number;
}

export interface UserRepo {
  id: number;
  installationId: number;
  fullName: string;
  private: boolean;
  admin: boolean;
  push: boolean;
  pull: boolean;
  /** The installation's page and what it granted (installation-permissions.ts). */
  installation: InstallationGrant;
}

export interface RepoAccess {
  private: boolean;
  admin: boolean;
  pull: boolean;
}

// Safety bound on pagination: 20 pages of 100 installations or repositories.
const MAX_PAGES = 20;

const User = z.object({ login: z.string().min(1), id: z.number().int() });
const Installation = z.object({
  id: z.number().int(),
  html_url: z.url({ protocol: /^https?$/ }).optional(),
  permissions: z.record(z.string(), z.string()).optional(),
});
const Repo = z.object({
  id: z.number().int(),
  full_name: z.string().min(1),
  private: z.boolean(),
  permissions: z
    .object({
      admin: z.boolean().optional(),
      push: z.boolean().optional(),
      pull: z.boolean().optional(),
    })
    .optional(),
});

export class GitHubUserApi {
  readonly #octokit: InstanceType<typeof ProbotOctokit>;

  constructor(
    apiUrl: string,
    /** Null asks anonymously, as a visitor who is not signed in. */
    token: string | null,
  ) {
    this.#octokit = new ProbotOctokit({
      baseUrl: apiUrl,
      ...(token ? { auth: { token } } : {}),
      log: { debug() {}, info() {}, warn() {}, error() {} },
    });
  }

  async user(): Promise<GitHubUser> {
    const { data } = await this.#call(() => this.#octokit.request("GET /user"));
    const user = parseAnswer(User, data, "GET /user");
    return { login: user.login, id: user.id };
  }

  /** Repositories the user can see through the app's installations, with their permissions. */
  async repos(): Promise<UserRepo[]> {
    const installations = await this.#pages("GET /user/installations", {}, Installation);
    const out: UserRepo[] = [];
    for (const installation of installations) {
      const route = "GET /user/installations/{installation_id}/repositories";
      const repos = await this.#pages(route, { installation_id: installation.id }, Repo);
      for (const repo of repos) {
        out.push({
          id: repo.id,
          installationId: installation.id,
          fullName: repo.full_name,
          ...access(repo),
          push: repo.permissions?.push === true,
          installation: { url: installation.html_url, permissions: installation.permissions },
        });
      }
    }
    return out;
  }

  /**
   * The user's access to one repository, asked by its id: a name can move to another repository
   * after a rename or transfer. Null when GitHub says it does not exist for them.
   */
  async repoAccess(id: number): Promise<(RepoAccess & { fullName: string }) | null> {
    const response = await this.#call(() =>
      this.#octokit.request("GET /repositories/{id}", { id }),
    ).catch((error: unknown) => {
      if (githubStatus(error) === 404) return null;
      throw error;
    });
    if (!response) return null;
    const repo = parseAnswer(Repo, response.data, "GET /repositories/{id}");
    return { ...access(repo), fullName: repo.full_name };
  }

  /** `.github/vmpilot.yml` as a job reads it, through the same loader, as this user sees it. */
  repoConfig(fullName: string): Promise<RepoConfigLoad> {
    const [owner = "", repo = ""] = fullName.split("/");
    return this.#call(() => loadRepoConfig(this.#octokit, { owner, repo }));
  }

  /** A file of the repository's default branch as this user sees it; undefined when there is none. */
  repoFile(fullName: string, path: string): Promise<string | undefined> {
    const [owner = "", repo = ""] = fullName.split("/");
    return this.#call(() => readRepoFile(this.#octokit, { owner, repo, path }));
  }

  async #pages<T>(
    route: "GET /user/installations" | "GET /user/installations/{installation_id}/repositories",
    params: Record<string, unknown>,
    schema: z.ZodType<T>,
  ): Promise<T[]> {
    const out: T[] = [];
    const pages = this.#octokit.paginate.iterator(route, { ...params, per_page: 100 });
    let count = 0;
    await this.#call(async () => {
      for await (const { data } of pages) {
        out.push(...parseAnswer(z.array(schema), data, route));
        if (++count >= MAX_PAGES) break;
      }
    });
    return out;
  }

  /** A 401 means the token was revoked or expired: the session must end. */
  async #call<T>(request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (error) {
      if (githubStatus(error) === 401) throw new GitHubAuthError();
      throw error;
    }
  }
}

/** The user's token was revoked or expired: the session must end. */
export class GitHubAuthError extends Error {
  constructor() {
    super("GitHub rejected the user token");
  }
}

function access(repo: z.infer<typeof Repo>): RepoAccess {
  return {
    private: repo.private,
    admin: repo.permissions?.admin === true,
    pull: repo.permissions?.pull === true,
  };
}
