import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A loopback stand-in for GitHub's OAuth web flow and the REST endpoints the web pages call with a
 * user token. Browsers reach it too (nock cannot intercept them). The API lives under /api/v3, as
 * on GitHub Enterprise.
 */

export type Role = "admin" | "write" | "read";

export interface FakeRepo {
  id: number;
  installationId: number;
  fullName: string;
  private: boolean;
  /** Explicit access per login. */
  access: Record<string, Role>;
  /** Text of .github/vmpilot.yml on the default branch. */
  configFile?: string;
  /** `.github/vmpilot/memory.md` on its default branch. */
  memoryFile?: string;
}

export interface GitHubFake {
  webUrl: string;
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  repos: FakeRepo[];
  /** Who the next authorization signs in as; with an id, GitHub's user id for that login from now. */
  signInAs(login: string, id?: number): void;
  /** Every request as "METHOD /path", in order. */
  requests: string[];
  /** Requests the fake could not answer as GitHub would. */
  problems: string[];
  /** Revokes every token issued so far. */
  revokeTokens(): void;
  close(): Promise<void>;
}

const USER_IDS: Record<string, number> = {};

export async function startGitHubFake(): Promise<GitHubFake> {
  const clientId = "Iv1.fakeclientid";
  const clientSecret = randomBytes(20).toString("hex");
  const codes = new Map<string, { login: string; redirectUri: string }>();
  const tokens = new Map<string, string>();
  let nextLogin = "";

  const fake: GitHubFake = {
    webUrl: "",
    apiUrl: "",
    clientId,
    clientSecret,
    repos: [],
    signInAs(login, id) {
      nextLogin = login;
      if (id !== undefined) USER_IDS[login] = id;
    },
    requests: [],
    problems: [],
    revokeTokens() {
      tokens.clear();
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: Error) => {
      fake.problems.push(`${req.method} ${req.url}: ${error.message}`);
      json(res, 500, { message: error.message });
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://fake");
    fake.requests.push(`${req.method} ${url.pathname}`);
    const path = url.pathname;

    if (req.method === "GET" && path === "/login/oauth/authorize") {
      const redirectUri = url.searchParams.get("redirect_uri") ?? "";
      if (url.searchParams.get("client_id") !== clientId || !nextLogin) {
        fake.problems.push("authorize: wrong client id or nobody to sign in");
        return json(res, 400, { error: "bad_request" });
      }
      const code = randomBytes(10).toString("hex");
      codes.set(code, { login: nextLogin, redirectUri });
      const back = new URL(redirectUri);
      back.searchParams.set("code", code);
      back.searchParams.set("state", url.searchParams.get("state") ?? "");
      res.writeHead(302, { location: back.toString() }).end();
      return;
    }
    if (req.method === "POST" && path === "/login/oauth/access_token") {
      // GitHub takes the exchange as a form or as JSON (Octokit sends JSON).
      const text = await body(req);
      const form = req.headers["content-type"]?.includes("json")
        ? new URLSearchParams(JSON.parse(text))
        : new URLSearchParams(text);
      const grant = codes.get(form.get("code") ?? "");
      if (form.get("client_id") !== clientId || form.get("client_secret") !== clientSecret) {
        return json(res, 200, { error: "incorrect_client_credentials" });
      }
      if (!grant || grant.redirectUri !== form.get("redirect_uri")) {
        return json(res, 200, {
          error: "bad_verification_code",
          error_description: "The code passed is incorrect or expired.",
        });
      }
      codes.delete(form.get("code") ?? "");
      const token = `ghu_${randomBytes(18).toString("hex")}`;
      tokens.set(token, grant.login);
      return json(res, 200, { access_token: token, token_type: "bearer", scope: "" });
    }
    if (!path.startsWith("/api/v3/")) return json(res, 404, { message: "Not Found" });
    if (req.method !== "GET") {
      fake.problems.push(`unexpected ${req.method} ${path}`);
      return json(res, 404, { message: "Not Found" });
    }

    const auth = req.headers.authorization;
    const login = auth ? tokens.get(auth.replace(/^(Bearer|token) /, "")) : undefined;
    if (auth && !login) return json(res, 401, { message: "Bad credentials" });
    const api = path.slice("/api/v3".length);
    const visible = (repo: FakeRepo) => !repo.private || (login && repo.access[login]);
    const explicit = fake.repos.filter((r) => login && r.access[login]);

    if (api === "/user") {
      if (!login) return json(res, 401, { message: "Requires authentication" });
      USER_IDS[login] ??= 1000 + Object.keys(USER_IDS).length;
      return json(res, 200, { login, id: USER_IDS[login] });
    }
    if (api === "/user/installations") {
      if (!login) return json(res, 401, { message: "Requires authentication" });
      const ids = [...new Set(explicit.map((r) => r.installationId))];
      return json(res, 200, { total_count: ids.length, installations: ids.map((id) => ({ id })) });
    }
    const inst = /^\/user\/installations\/(\d+)\/repositories$/.exec(api);
    if (inst) {
      const repos = explicit.filter((r) => r.installationId === Number(inst[1]));
      return json(res, 200, {
        total_count: repos.length,
        repositories: repos.map((r) => repoBody(r, login)),
      });
    }
    const contents = /^\/repos\/([^/]+\/[^/]+)\/contents\/(.+)$/.exec(api);
    const asked = decodeURIComponent(contents?.[2] ?? "");
    if (contents && (asked === ".github/vmpilot.yml" || asked === ".github/vmpilot/memory.md")) {
      const repo = findRepo(contents[1]);
      const file = asked === ".github/vmpilot.yml" ? repo?.configFile : repo?.memoryFile;
      if (!repo || !visible(repo) || file === undefined)
        return json(res, 404, { message: "Not Found" });
      if (req.headers.accept?.includes("raw")) {
        res.writeHead(200, { "content-type": "application/vnd.github.raw" }).end(file);
        return;
      }
      return json(res, 200, {
        type: "file",
        encoding: "base64",
        content: Buffer.from(file).toString("base64"),
      });
    }
    const byId = /^\/repositories\/(\d+)$/.exec(api);
    if (byId) {
      const repo = fake.repos.find((r) => r.id === Number(byId[1]));
      if (!repo || !visible(repo)) return json(res, 404, { message: "Not Found" });
      return json(res, 200, repoBody(repo, login));
    }
    const single = /^\/repos\/([^/]+\/[^/]+)$/.exec(api);
    if (single) {
      const repo = findRepo(single[1]);
      if (!repo || !visible(repo)) return json(res, 404, { message: "Not Found" });
      return json(res, 200, repoBody(repo, login));
    }
    fake.problems.push(`unhandled GET ${api}`);
    json(res, 404, { message: "Not Found" });
  }

  function findRepo(fullName: string | undefined): FakeRepo | undefined {
    return fake.repos.find((r) => r.fullName.toLowerCase() === fullName?.toLowerCase());
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  fake.webUrl = `http://127.0.0.1:${port}`;
  fake.apiUrl = `http://127.0.0.1:${port}/api/v3`;
  return fake;
}

function repoBody(repo: FakeRepo, login: string | undefined) {
  const role = login ? repo.access[login] : undefined;
  const body: Record<string, unknown> = {
    id: repo.id,
    full_name: repo.fullName,
    private: repo.private,
  };
  // GitHub reports permissions to signed-in users only; anyone may pull a public repository.
  if (login) {
    body.permissions = {
      admin: role === "admin",
      maintain: role === "admin",
      push: role === "admin" || role === "write",
      triage: role !== undefined,
      pull: role !== undefined || !repo.private,
    };
  }
  return body;
}

function json(res: ServerResponse, status: number, value: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(value));
}

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}
