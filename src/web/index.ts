import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { isWebSessionLive } from "../store/web-sessions.ts";
import { callback, login, logout } from "./auth.ts";
import { type RequestContext, type WebDeps, WebServices } from "./context.ts";
import { GitHubAuthError } from "./github-user.ts";
import { html } from "./html.ts";
import { HttpError, redirect, SECURITY_HEADERS, SignInRequired, send } from "./http.ts";
import { jobEvents } from "./job-stream.ts";
import { jobDetail, jobList } from "./jobs.ts";
import { createKey, keysPage, revokeKey } from "./keys.ts";
import { messagePage, page } from "./layout.ts";
import type { Session } from "./session.ts";
import { repoSettings, saveRepoSettings, settingsIndex } from "./settings.ts";
import { usagePage } from "./usage.ts";

export type { WebDeps } from "./context.ts";

type Route = [
  method: string,
  pattern: RegExp,
  run: (web: WebServices, ctx: RequestContext) => Promise<void>,
];

const NAME = "([A-Za-z0-9_.-]+)";
const ROUTES: Route[] = [
  ["GET", /^\/$/, home],
  ["GET", /^\/login$/, login],
  ["GET", /^\/login\/callback$/, callback],
  ["POST", /^\/logout$/, logout],
  ["GET", /^\/settings$/, settingsIndex],
  ["GET", new RegExp(`^/settings/${NAME}/${NAME}$`), repoSettings],
  ["POST", new RegExp(`^/settings/${NAME}/${NAME}$`), saveRepoSettings],
  ["GET", /^\/jobs$/, jobList],
  ["GET", /^\/jobs\/(\d{1,15})$/, jobDetail],
  ["GET", /^\/jobs\/(\d{1,15})\/events$/, jobEvents],
  ["GET", /^\/usage$/, usagePage],
  ["GET", /^\/keys$/, keysPage],
  ["POST", /^\/keys$/, createKey],
  ["POST", /^\/keys\/(\d{1,15})\/revoke$/, revokeKey],
];

const STATIC: Record<string, { type: string; body: Buffer }> = {
  "/static/vmpilot.css": asset("vmpilot.css", "text/css; charset=utf-8"),
  "/static/live.js": asset("live.js", "text/javascript; charset=utf-8"),
  "/static/copy.js": asset("copy.js", "text/javascript; charset=utf-8"),
};

export interface Web {
  /** A Probot 14 server handler: answers the web pages' paths and returns false for others. */
  handler(req: IncomingMessage, res: ServerResponse): Promise<boolean>;
  /** Ends live event streams, so the HTTP server can close. */
  close(): void;
}

export function mountWeb(deps: WebDeps): Web {
  const web = new WebServices(deps);
  return {
    async handler(req, res) {
      const url = new URL(req.url ?? "/", "http://web.invalid");
      const file = STATIC[url.pathname];
      if (file && (req.method === "GET" || req.method === "HEAD")) {
        res.writeHead(200, {
          ...SECURITY_HEADERS,
          "content-type": file.type,
          "cache-control": "public, max-age=300",
        });
        res.end(req.method === "HEAD" ? undefined : file.body);
        return true;
      }
      const match = findRoute(req.method ?? "GET", url.pathname);
      if (!match) return false;
      // Browsers remember to use https only when told so over https.
      if (web.secure) res.setHeader("strict-transport-security", "max-age=31536000");
      const ctx: RequestContext = {
        req,
        res,
        url,
        session: await liveSession(web, req),
        params: match.params,
      };
      try {
        await match.run(web, ctx);
      } catch (error) {
        handleError(web, ctx, error);
      }
      return true;
    },
    close() {
      for (const stream of web.streams) stream.end();
      web.streams.clear();
    },
  };
}

/** The cookie's session, if the server still knows it (signing out revokes it there). */
async function liveSession(web: WebServices, req: IncomingMessage): Promise<Session | null> {
  const session = web.jar.readSession(req);
  return session && (await isWebSessionLive(web.pool, { id: session.sid, userId: session.userId }))
    ? session
    : null;
}

function findRoute(method: string, path: string) {
  let pathMatched = false;
  for (const [m, pattern, run] of ROUTES) {
    const found = pattern.exec(path);
    if (!found) continue;
    pathMatched = true;
    if (m === method || (m === "GET" && method === "HEAD")) return { run, params: found.slice(1) };
  }
  return pathMatched ? { run: methodNotAllowed, params: [] } : null;
}

async function methodNotAllowed(_web: WebServices, _ctx: RequestContext): Promise<void> {
  throw new HttpError(405, "That method is not allowed here.");
}

async function home(_web: WebServices, ctx: RequestContext): Promise<void> {
  const body = html`<h1>vmpilot</h1>
<p>vmpilot turns labelled issues into tested draft pull requests.</p>
${
  ctx.session
    ? html`<ul>
  <li><a href="/jobs">Jobs</a>: what vmpilot has been doing, with each job's job log.</li>
  <li><a href="/settings">Settings</a>: who may trigger it, model and budgets, per repository.</li>
  <li><a href="/usage">Usage</a>: tokens and cost per repository per day.</li>
  <li><a href="/keys">API keys</a>: for chat clients such as Open WebUI (<code>/v1</code>).</li>
</ul>`
    : html`<p><a class="button primary" href="/login">Sign in with GitHub</a> to see jobs, settings and usage.</p>`
}`;
  send(ctx.res, 200, page({ title: "Home", session: ctx.session, body }));
}

function handleError(web: WebServices, ctx: RequestContext, error: unknown): void {
  if (ctx.res.headersSent) {
    ctx.res.end();
    return;
  }
  if (error instanceof SignInRequired || error instanceof GitHubAuthError) {
    const next = encodeURIComponent(ctx.url.pathname + ctx.url.search);
    // A revoked or expired token ends the session.
    const clear: Record<string, string> =
      error instanceof GitHubAuthError ? { "set-cookie": web.jar.clearSession() } : {};
    redirect(ctx.res, `/login?next=${next}`, clear);
    return;
  }
  if (error instanceof HttpError) {
    const title = error.status === 404 ? "Not found" : error.status === 403 ? "Forbidden" : "Sorry";
    send(ctx.res, error.status, messagePage(ctx.session, title, error.message));
    return;
  }
  web.logger?.error({ err: error, path: ctx.url.pathname }, "web page failed");
  send(ctx.res, 500, messagePage(ctx.session, "Something went wrong", "Please try again later."));
}

function asset(name: string, type: string) {
  return { type, body: readFileSync(new URL(`./static/${name}`, import.meta.url)) };
}
