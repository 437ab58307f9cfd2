// GitHub as seen by the signed-in user: every permission the web pages rely on is asked here,
// with the user's own token, never taken from the browser.

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
  pull: boolean;
}

export interface RepoAccess {
  private: boolean;
  admin: boolean;
  pull: boolean;
}

// Safety bound on pagination: 20 pages of 100 installations or repositories.
const MAX_PAGES = 20;

export class GitHubUserApi {
  constructor(
    private readonly apiUrl: string,
    /** Null asks anonymously, as a visitor who is not signed in. */
    private readonly token: string | null,
  ) {}

  async user(): Promise<GitHubUser> {
    const body = (await this.#get("/user")) as { login: string; id: number };
    return { login: body.login, id: body.id };
  }

  /** Repositories the user can see through the app's installations, with their permissions. */
  async repos(): Promise<UserRepo[]> {
    const installations = await this.#pages<{ id: number }>("/user/installations", "installations");
    const out: UserRepo[] = [];
    for (const installation of installations) {
      const repos = await this.#pages<RepoBody>(
        `/user/installations/${installation.id}/repositories`,
        "repositories",
      );
      for (const repo of repos) {
        out.push({
          id: repo.id,
          installationId: installation.id,
          fullName: repo.full_name,
          ...access(repo),
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
    const body = (await this.#get(`/repositories/${id}`, [404])) as RepoBody | null;
    return body ? { ...access(body), fullName: body.full_name } : null;
  }

  /** A text file from the default branch, or null when it does not exist. */
  async fileText(fullName: string, path: string): Promise<string | null> {
    const body = (await this.#get(`/repos/${fullName}/contents/${path}`, [404])) as {
      content?: string;
      encoding?: string;
    } | null;
    if (body?.encoding !== "base64" || typeof body.content !== "string") return null;
    return Buffer.from(body.content, "base64").toString("utf8");
  }

  async #pages<T>(path: string, key: string): Promise<T[]> {
    const out: T[] = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const body = (await this.#get(`${path}?per_page=100&page=${page}`)) as Record<string, T[]>;
      const items = body[key] ?? [];
      out.push(...items);
      if (items.length < 100) break;
    }
    return out;
  }

  async #get(path: string, absent: number[] = []): Promise<unknown> {
    const headers: Record<string, string> = {
      accept: "application/vnd.github+json",
      "user-agent": "vmpilot",
      "x-github-api-version": "2022-11-28",
    };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    const res = await fetch(`${this.apiUrl}${path}`, { headers });
    if (absent.includes(res.status)) return null;
    if (res.status === 401) throw new GitHubAuthError();
    if (!res.ok) throw new Error(`GitHub GET ${path.split("?")[0]} answered ${res.status}`);
    return res.json();
  }
}

/** The user's token was revoked or expired: the session must end. */
export class GitHubAuthError extends Error {
  constructor() {
    super("GitHub rejected the user token");
  }
}

interface RepoBody {
  id: number;
  full_name: string;
  private: boolean;
  permissions?: { admin?: boolean; pull?: boolean };
}

function access(repo: RepoBody): RepoAccess {
  return {
    private: repo.private,
    admin: repo.permissions?.admin === true,
    pull: repo.permissions?.pull === true,
  };
}
