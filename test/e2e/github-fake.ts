// A loopback stand-in for the part of GitHub's REST API the app uses, for tests and benchmarks that
// cross process boundaries (where nock cannot follow): the app's baseUrl points here, as it would
// at a GitHub Enterprise server. It keeps comments and pull requests as GitHub would, checks the
// app's credentials (a JWT for the app's routes, an issued installation token elsewhere), pages
// through the app's installations and their repositories, and records every call.
import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeCall {
  method: string;
  /** Path without the query string. */
  path: string;
  query: URLSearchParams;
  // biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON.
  body: any;
  /** The Authorization header. */
  authorization: string;
  /** performance.now() when the request arrived. */
  at: number;
}

export interface FakeComment {
  id: number;
  repo: string;
  issue: number;
  /** The body as posted, then every edit, in order. */
  bodies: string[];
}

export interface FakePull {
  number: number;
  repo: string;
  head: string;
  base: string;
  title: string;
  body: string;
  draft: boolean;
  /** Bodies the app set after opening it. */
  updates: string[];
}

export interface FakeIssue {
  title: string;
  body: string;
  user: string;
}

/** An installation of the app, and the repositories it covers. */
export interface FakeInstallation {
  id: number;
  account: string;
  suspended?: boolean;
  repositories: Array<{ id: number; fullName: string }>;
  /** The installation's own token; default the fake's `token`. */
  token?: string;
}

export interface GitHubFakeOptions {
  slug?: string;
  /** The token the fake hands out for every installation without one of its own. */
  token: string;
  /** The app's installations; a test may change them between calls. */
  installations?: FakeInstallation[];
  /** The most items one page of a list holds (GitHub's is 100). */
  pageSize?: number;
  /** Issues by "owner/repo#number"; others are answered with a plain default. */
  issues?: Record<string, FakeIssue>;
  /** A status to answer a call with instead of handling it, e.g. a 502 for the first try. */
  fail?: (call: FakeCall) => number | undefined;
  /** Awaited before a call is answered: a test holds calls back with it. */
  before?: (call: FakeCall) => Promise<void>;
}

export interface GitHubFake extends EventEmitter<{ call: [FakeCall] }> {
  url: string;
  calls: FakeCall[];
  comments: FakeComment[];
  pulls: FakePull[];
  /** Calls no route matched, or with the wrong credentials. */
  problems: string[];
  close(): Promise<void>;
}

type Answer = [status: number, json: unknown, headers?: Record<string, string>];
type Route = (call: FakeCall, match: RegExpExecArray) => Answer | Promise<Answer>;

const REPO = "/repos/([^/]+)/([^/]+)";
// Routes GitHub answers to the app's JWT; every other one wants an installation token.
const APP_ROUTE = /^\/app(\/|$)|^\/repos\/[^/]+\/[^/]+\/installation$/;

export async function startGitHubFake(options: GitHubFakeOptions): Promise<GitHubFake> {
  const calls: FakeCall[] = [];
  const comments: FakeComment[] = [];
  const pulls: FakePull[] = [];
  const problems: string[] = [];
  let nextId = 9_000_000;
  const now = () => new Date().toISOString();
  const repoOf = (m: RegExpExecArray) => `${m[1]}/${m[2]}`;
  // Where the fake listens, once it does.
  let base = "";
  const installations = () => options.installations ?? [];
  const tokenOf = (installation: FakeInstallation) => installation.token ?? options.token;
  const installationOf = (repo: string) =>
    installations().find((i) =>
      i.repositories.some((r) => r.fullName.toLowerCase() === repo.toLowerCase()),
    );
  const installationJson = (i: FakeInstallation) => ({
    id: i.id,
    account: { login: i.account, type: "Organization" },
    suspended_at: i.suspended ? now() : null,
  });
  const repositoryJson = (r: { id: number; fullName: string }) => ({
    id: r.id,
    full_name: r.fullName,
    private: false,
  });
  /** One page of a list, with a Link header to the next as GitHub sends it. */
  const page = (
    call: FakeCall,
    items: unknown[],
    wrap: (list: unknown[]) => unknown = (list) => list,
  ): Answer => {
    const size = Math.min(Number(call.query.get("per_page") ?? 30), options.pageSize ?? 100);
    const number = Number(call.query.get("page") ?? 1);
    const next = new URLSearchParams({ per_page: String(size), page: String(number + 1) });
    const headers: Record<string, string> =
      number * size < items.length ? { link: `<${base}${call.path}?${next}>; rel="next"` } : {};
    return [200, wrap(items.slice((number - 1) * size, number * size)), headers];
  };
  const commentJson = (c: FakeComment) => ({
    id: c.id,
    body: c.bodies.at(-1),
    user: { login: `${options.slug ?? "vmpilot"}[bot]`, type: "Bot" },
    created_at: now(),
    html_url: `https://github.com/${c.repo}/issues/${c.issue}#issuecomment-${c.id}`,
  });
  const pullJson = (p: FakePull) => ({
    number: p.number,
    state: "open",
    draft: p.draft,
    title: p.title,
    body: p.updates.at(-1) ?? p.body,
    html_url: `https://github.com/${p.repo}/pull/${p.number}`,
    head: { ref: p.head, repo: { full_name: p.repo } },
    base: { ref: p.base },
  });

  const routes: Array<[string, RegExp, Route]> = [
    ["GET", /^\/app$/, () => [200, { id: 1, slug: options.slug ?? "vmpilot", name: "vmpilot" }]],
    ["GET", /^\/app\/installations$/, (call) => page(call, installations().map(installationJson))],
    [
      "GET",
      /^\/installation\/repositories$/,
      (call) => {
        const token = call.authorization.replace(/^token /, "");
        const holders = installations().filter((i) => tokenOf(i) === token);
        if (holders.length !== 1) return [403, { message: "not one installation's token" }];
        const repositories = holders[0]?.repositories.map(repositoryJson) ?? [];
        return page(call, repositories, (list) => ({
          total_count: repositories.length,
          repositories: list,
        }));
      },
    ],
    [
      "GET",
      new RegExp(`^${REPO}/installation$`),
      (_c, m) => {
        const installation = installationOf(repoOf(m));
        return installation
          ? [200, installationJson(installation)]
          : [404, { message: "Not Found" }];
      },
    ],
    [
      "GET",
      new RegExp(`^${REPO}$`),
      (_c, m) => {
        const repo = installationOf(repoOf(m))?.repositories.find(
          (r) => r.fullName.toLowerCase() === repoOf(m).toLowerCase(),
        );
        return repo ? [200, repositoryJson(repo)] : [404, { message: "Not Found" }];
      },
    ],
    [
      "POST",
      /^\/app\/installations\/(\d+)\/access_tokens$/,
      (_c, m) => [
        201,
        {
          token: installations().find((i) => i.id === Number(m[1]))?.token ?? options.token,
          expires_at: new Date(Date.now() + 3_600_000).toISOString(),
          permissions: { issues: "write", contents: "write", pull_requests: "write" },
          repository_selection: "all",
        },
      ],
    ],
    [
      "GET",
      new RegExp(`^${REPO}/collaborators/([^/]+)/permission$`),
      (_c, m) => [200, { permission: "write", role_name: "write", user: { login: m[3] } }],
    ],
    [
      "POST",
      new RegExp(`^${REPO}/issues/(?:comments/)?\\d+/reactions$`),
      () => [201, { id: nextId++, content: "eyes" }],
    ],
    [
      "POST",
      new RegExp(`^${REPO}/issues/(\\d+)/comments$`),
      (call, m) => {
        const comment = {
          id: nextId++,
          repo: repoOf(m),
          issue: Number(m[3]),
          bodies: [String(call.body.body)],
        };
        comments.push(comment);
        return [201, commentJson(comment)];
      },
    ],
    [
      "PATCH",
      new RegExp(`^${REPO}/issues/comments/(\\d+)$`),
      (call, m) => {
        const comment = comments.find((c) => c.id === Number(m[3]) && c.repo === repoOf(m));
        if (!comment) return [404, { message: "Not Found" }];
        comment.bodies.push(String(call.body.body));
        return [200, commentJson(comment)];
      },
    ],
    [
      "GET",
      new RegExp(`^${REPO}/issues/(\\d+)/comments$`),
      (_c, m) => [
        200,
        comments.filter((c) => c.repo === repoOf(m) && c.issue === Number(m[3])).map(commentJson),
      ],
    ],
    [
      "GET",
      new RegExp(`^${REPO}/issues/(\\d+)$`),
      (_c, m) => {
        const issue = options.issues?.[`${repoOf(m)}#${m[3]}`] ?? {
          title: `Issue ${m[3]}`,
          body: "",
          user: "octocat",
        };
        return [
          200,
          {
            number: Number(m[3]),
            title: issue.title,
            body: issue.body,
            user: { login: issue.user },
          },
        ];
      },
    ],
    ["GET", new RegExp(`^${REPO}/contents/(.+)$`), () => [404, { message: "Not Found" }]],
    [
      "GET",
      /^\/users\/([^/]+)$/,
      (_c, m) => [200, { login: m[1], id: 1000 + (m[1]?.length ?? 0) }],
    ],
    [
      "GET",
      new RegExp(`^${REPO}/pulls$`),
      (call, m) => {
        const head = call.query.get("head")?.split(":")[1];
        const open = pulls.filter((p) => p.repo === repoOf(m) && (!head || p.head === head));
        return [200, open.map(pullJson)];
      },
    ],
    [
      "POST",
      new RegExp(`^${REPO}/pulls$`),
      (call, m) => {
        const repo = repoOf(m);
        if (pulls.some((p) => p.repo === repo && p.head === call.body.head)) {
          const message = `A pull request already exists for ${m[1]}:${call.body.head}.`;
          return [422, { message: "Validation Failed", errors: [{ message }] }];
        }
        const pull: FakePull = {
          number: pulls.length + 100,
          repo,
          head: call.body.head,
          base: call.body.base,
          title: call.body.title,
          body: call.body.body,
          draft: Boolean(call.body.draft),
          updates: [],
        };
        pulls.push(pull);
        return [201, pullJson(pull)];
      },
    ],
    [
      "GET",
      new RegExp(`^${REPO}/pulls/(\\d+)$`),
      (_c, m) => {
        const pull = pulls.find((p) => p.repo === repoOf(m) && p.number === Number(m[3]));
        return pull ? [200, pullJson(pull)] : [404, { message: "Not Found" }];
      },
    ],
    [
      "PATCH",
      new RegExp(`^${REPO}/pulls/(\\d+)$`),
      (call, m) => {
        const pull = pulls.find((p) => p.repo === repoOf(m) && p.number === Number(m[3]));
        if (!pull) return [404, { message: "Not Found" }];
        if (typeof call.body.body === "string") pull.updates.push(call.body.body);
        return [200, pullJson(pull)];
      },
    ],
  ];

  const emitter = new EventEmitter<{ call: [FakeCall] }>();
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const at = performance.now();
    const url = new URL(req.url ?? "/", "http://github.test");
    const text = Buffer.concat(chunks).toString("utf8");
    const call: FakeCall = {
      method: req.method ?? "GET",
      path: url.pathname,
      query: url.searchParams,
      body: text ? JSON.parse(text) : undefined,
      authorization: req.headers.authorization ?? "",
      at,
    };
    calls.push(call);
    emitter.emit("call", call);
    const send = (status: number, json: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...headers });
      res.end(status === 204 ? undefined : JSON.stringify(json));
    };
    const tokens = [options.token, ...installations().map(tokenOf)];
    const jwt = /^bearer [\w-]+\.[\w-]+\.[\w-]+$/i;
    if (
      APP_ROUTE.test(call.path)
        ? !jwt.test(call.authorization)
        : !tokens.some((token) => call.authorization === `token ${token}`)
    ) {
      problems.push(`${call.method} ${call.path}: bad credentials`);
      return send(401, { message: "Bad credentials" });
    }
    const failure = options.fail?.(call);
    if (failure) return send(failure, { message: "fake failure" });
    await options.before?.(call);
    for (const [method, pattern, route] of routes) {
      const match = method === call.method ? pattern.exec(call.path) : null;
      if (!match) continue;
      return send(...(await route(call, match)));
    }
    problems.push(`${call.method} ${call.path}: no route`);
    send(404, { message: "Not Found" });
  };
  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      problems.push(`${req.method} ${req.url}: ${String(error)}`);
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  base = `http://127.0.0.1:${port}`;
  return Object.assign(emitter, {
    url: base,
    calls,
    comments,
    pulls,
    problems,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
