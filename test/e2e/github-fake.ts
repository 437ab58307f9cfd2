// A loopback stand-in for the part of GitHub's REST API the app uses, for tests and benchmarks that
// cross process boundaries (where nock cannot follow): the app's baseUrl points here, as it would
// at a GitHub Enterprise server. It keeps comments and pull requests as GitHub would, checks the
// app's credentials (a JWT for /app routes, an issued installation token elsewhere), and records
// every call.
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

export interface GitHubFakeOptions {
  slug?: string;
  /** The token the fake hands out for every installation. */
  token: string;
  /** Issues by "owner/repo#number"; others are answered with a plain default. */
  issues?: Record<string, FakeIssue>;
  /** A status to answer a call with instead of handling it, e.g. a 502 for the first try. */
  fail?: (call: FakeCall) => number | undefined;
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

type Route = (
  call: FakeCall,
  match: RegExpExecArray,
) => [number, unknown] | Promise<[number, unknown]>;

const REPO = "/repos/([^/]+)/([^/]+)";

export async function startGitHubFake(options: GitHubFakeOptions): Promise<GitHubFake> {
  const calls: FakeCall[] = [];
  const comments: FakeComment[] = [];
  const pulls: FakePull[] = [];
  const problems: string[] = [];
  let nextId = 9_000_000;
  const now = () => new Date().toISOString();
  const repoOf = (m: RegExpExecArray) => `${m[1]}/${m[2]}`;
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
    [
      "POST",
      /^\/app\/installations\/(\d+)\/access_tokens$/,
      () => [
        201,
        {
          token: options.token,
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
      at,
    };
    calls.push(call);
    emitter.emit("call", call);
    const send = (status: number, json: unknown) => {
      res.writeHead(status, { "content-type": "application/json; charset=utf-8" });
      res.end(status === 204 ? undefined : JSON.stringify(json));
    };
    const auth = req.headers.authorization ?? "";
    const wanted = call.path.startsWith("/app") ? /^bearer [\w-]+\.[\w-]+\.[\w-]+$/i : null;
    if (wanted ? !wanted.test(auth) : auth !== `token ${options.token}`) {
      problems.push(`${call.method} ${call.path}: bad credentials`);
      return send(401, { message: "Bad credentials" });
    }
    const failure = options.fail?.(call);
    if (failure) return send(failure, { message: "fake failure" });
    for (const [method, pattern, route] of routes) {
      const match = method === call.method ? pattern.exec(call.path) : null;
      if (!match) continue;
      const [status, json] = await route(call, match);
      return send(status, json);
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
  return Object.assign(emitter, {
    url: `http://127.0.0.1:${port}`,
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
