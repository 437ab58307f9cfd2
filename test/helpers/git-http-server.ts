import { spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface GitHttpServer {
  /** Clone URL of a repository directory under `projectRoot`, without credentials. */
  url(repo: string): string;
  /** Requests that carried the right token, and those refused. */
  readonly accepted: number;
  readonly refused: number;
  close(): Promise<void>;
}

export interface GitHttpServerOptions {
  /** Directory holding the served repositories (bare or not). */
  projectRoot: string;
  /** When set, every request must authenticate with it (Basic `any:token` or Bearer). */
  token?: string;
}

function authorized(header: string | undefined, token: string): boolean {
  if (!header) return false;
  if (header === `Bearer ${token}`) return true;
  if (!header.startsWith("Basic ")) return false;
  const decoded = Buffer.from(header.slice(6), "base64").toString();
  return decoded.slice(decoded.indexOf(":") + 1) === token;
}

/**
 * Git's smart HTTP protocol on loopback: a node server running `git http-backend` as CGI,
 * optionally demanding a token the way GitHub does.
 */
export async function startGitHttpServer(options: GitHttpServerOptions): Promise<GitHttpServer> {
  let accepted = 0;
  let refused = 0;
  const server = http.createServer((req, res) => {
    if (options.token && !authorized(req.headers.authorization, options.token)) {
      refused++;
      res.writeHead(401, { "WWW-Authenticate": 'Basic realm="git"' }).end();
      return;
    }
    accepted++;
    const url = new URL(req.url ?? "/", "http://localhost");
    const cgi = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        GIT_PROJECT_ROOT: options.projectRoot,
        GIT_HTTP_EXPORT_ALL: "1",
        REQUEST_METHOD: req.method ?? "GET",
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        REMOTE_ADDR: req.socket.remoteAddress ?? "",
        REMOTE_USER: "git",
        ...(req.headers["content-encoding"]
          ? { HTTP_CONTENT_ENCODING: req.headers["content-encoding"] }
          : {}),
        ...(req.headers["git-protocol"]
          ? { GIT_PROTOCOL: String(req.headers["git-protocol"]) }
          : {}),
      },
      stdio: ["pipe", "pipe", "inherit"],
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on("data", (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end === -1) return;
      headersDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString().split("\r\n")) {
        const colon = line.indexOf(":");
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
        else res.setHeader(name, value);
      }
      res.writeHead(status);
      res.write(head.subarray(end + 4));
    });
    cgi.on("close", () => res.end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (repo) => `http://127.0.0.1:${port}/${repo}`,
    get accepted() {
      return accepted;
    },
    get refused() {
      return refused;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
