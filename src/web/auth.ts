import { renameKeyOwner } from "../store/api-keys.ts";
import { createWebSession, revokeWebSession } from "../store/web-sessions.ts";
import type { RequestContext, WebServices } from "./context.ts";
import { GitHubUserApi } from "./github-user.ts";
import { type Html, html } from "./html.ts";
import { HttpError, readForm, redirect, SignInRequired, send } from "./http.ts";
import { page } from "./layout.ts";
import { authorizeUrl, exchangeCode, SignInRefused } from "./oauth.ts";
import { randomToken, SESSION_SECONDS, type Session, safeEqual } from "./session.ts";

const CALLBACK_PATH = "/login/callback";

// Browsers drop tabs and newlines from URLs, so "/\t/evil.example" would become "//evil.example".
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f]/;
const SELF = "http://vmpilot.invalid";

/**
 * A same-origin path to return to after signing in; anything else becomes "/". It is resolved
 * against the app's own origin as a browser would, and only its path, query and fragment are kept.
 */
export function localPath(value: string | null): string {
  if (!value?.startsWith("/") || CONTROL.test(value)) return "/";
  let url: URL;
  try {
    url = new URL(value, SELF);
  } catch {
    return "/";
  }
  if (url.origin !== SELF) return "/";
  const path = `${url.pathname}${url.search}${url.hash}`;
  // "/\\evil" and "//evil" resolve to other hosts above; this keeps "/%2F/evil" from doing so later.
  return path.startsWith("//") ? "/" : path;
}

export async function login(web: WebServices, ctx: RequestContext): Promise<void> {
  const oauth = web.config.oauth;
  if (!oauth) {
    send(
      ctx.res,
      503,
      page({ title: "Sign-in is not configured", session: null, body: setupHelp(web) }),
    );
    return;
  }
  const state = randomToken();
  const wanted = ctx.url.searchParams.get("next");
  if (wanted !== null && CONTROL.test(wanted)) {
    throw new HttpError(400, "The page to return to is not a valid address.");
  }
  const next = localPath(wanted);
  const location = authorizeUrl(
    web.config.githubApiUrl,
    oauth,
    web.absoluteUrl(CALLBACK_PATH),
    state,
  );
  redirect(ctx.res, location, { "set-cookie": web.jar.stateCookie({ state, next }) });
}

export async function callback(web: WebServices, ctx: RequestContext): Promise<void> {
  const oauth = web.config.oauth;
  if (!oauth) throw new HttpError(404, "Sign-in is not configured.");
  const saved = web.jar.readState(ctx.req);
  const state = ctx.url.searchParams.get("state") ?? "";
  const code = ctx.url.searchParams.get("code");
  // The state cookie is signed and SameSite=Lax; a callback without the matching cookie was not
  // started by this browser (login CSRF), so it must not sign anybody in.
  if (!saved || !state || !safeEqual(state, saved.state)) {
    throw new HttpError(400, "The sign-in could not be verified. Please start again.");
  }
  if (!code) {
    const reason = ctx.url.searchParams.get("error_description") ?? "GitHub did not sign you in.";
    throw new HttpError(400, reason);
  }
  const token = await exchangeCode(
    web.config.githubApiUrl,
    oauth,
    code,
    web.absoluteUrl(CALLBACK_PATH),
  ).catch((error: unknown) => {
    if (error instanceof SignInRefused) throw new HttpError(400, error.message);
    throw error;
  });
  const user = await new GitHubUserApi(web.config.githubApiUrl, token).user();
  const sid = randomToken();
  const expiresAt = new Date(Date.now() + SESSION_SECONDS * 1000);
  await createWebSession(web.pool, { id: sid, userId: user.id, expiresAt });
  // Keys belong to the id; the login they show follows the person's renames.
  await renameKeyOwner(web.pool, user.id, user.login);
  redirect(ctx.res, localPath(saved.next), {
    "set-cookie": [
      web.jar.clearState(),
      web.jar.sessionCookie({ login: user.login, userId: user.id, token, sid }),
    ],
  });
}

export async function logout(web: WebServices, ctx: RequestContext): Promise<void> {
  const form = await readForm(ctx.req);
  requireCsrf(ctx.session, form);
  // Revoked on the server too: a copy of the cookie must not outlive signing out.
  await revokeWebSession(web.pool, ctx.session.sid);
  redirect(ctx.res, "/", { "set-cookie": web.jar.clearSession() });
}

/** The session, or a redirect to sign in and come back here. */
export function requireSession(ctx: RequestContext): Session {
  if (!ctx.session) throw new SignInRequired();
  return ctx.session;
}

/** Every POST carries the session's CSRF token; a missing session or token is refused. */
export function requireCsrf(
  session: Session | null,
  form: URLSearchParams,
): asserts session is Session {
  const sent = form.get("csrf") ?? "";
  if (!session || !sent || !safeEqual(sent, session.csrf)) {
    throw new HttpError(
      403,
      "This form has expired or did not come from this site. Reload the page and try again.",
    );
  }
}

function setupHelp(web: WebServices): Html {
  return html`<h1>Sign-in is not configured</h1>
<p>vmpilot signs maintainers in with the GitHub App's own OAuth credentials. To turn it on:</p>
<ol>
  <li>Open the GitHub App's settings page (<em>Settings → Developer settings → GitHub Apps</em>).</li>
  <li>Add the callback URL <code>${web.absoluteUrl(CALLBACK_PATH)}</code>.</li>
  <li>Copy the <em>Client ID</em> and generate a <em>client secret</em>.</li>
  <li>Set <code>GITHUB_CLIENT_ID</code> and <code>GITHUB_CLIENT_SECRET</code> in vmpilot's
    environment, then restart it.</li>
</ol>`;
}
