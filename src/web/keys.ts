// /keys: a maintainer's personal API keys for the chat face. A key is shown once, when made; the
// store keeps its hash. Only people who can push to a repository of the app's installations may
// make one, since even a scratch workspace spends the operator's model budget.
import { createApiKey, listApiKeys, revokeApiKey, TooManyKeys } from "../store/api-keys.ts";
import { userRepos } from "./access.ts";
import { requireCsrf, requireSession } from "./auth.ts";
import type { RequestContext, WebServices } from "./context.ts";
import { type Html, html } from "./html.ts";
import { HttpError, readForm, redirect, send } from "./http.ts";
import { csrfField, page } from "./layout.ts";
import type { Session } from "./session.ts";

const NAME_MAX = 80;

async function mayHaveKeys(web: WebServices, session: Session): Promise<boolean> {
  return (await userRepos(web, session)).some((repo) => repo.push);
}

function when(date: Date | null): string {
  return date ? date.toISOString().slice(0, 16).replace("T", " ") : "never";
}

async function render(
  web: WebServices,
  ctx: RequestContext,
  session: Session,
  extra: { created?: { name: string; secret: string }; error?: string } = {},
): Promise<void> {
  const allowed = await mayHaveKeys(web, session);
  const keys = await listApiKeys(web.pool, session.userId);
  const base = web.absoluteUrl("/v1");
  const created = extra.created
    ? html`<section class="notice" aria-labelledby="new-key-title">
<h2 id="new-key-title">Your new key “${extra.created.name}”</h2>
<p>Copy it now: it is not shown again.</p>
<p><input id="new-key" class="secret" readonly value="${extra.created.secret}" aria-label="The new API key" size="60">
<button type="button" class="button" data-copy="new-key">Copy</button></p>
</section>`
    : "";
  const rows = keys.map(
    (key) => html`<tr>
<td>${key.name}</td><td><code>…${key.hint}</code></td><td>${when(key.createdAt)}</td><td>${when(key.lastUsedAt)}</td>
<td>${
      key.revokedAt
        ? html`revoked ${when(key.revokedAt)}`
        : html`<form method="post" action="/keys/${String(key.id)}/revoke">${csrfField(session)}<button type="submit" class="link">Revoke</button></form>`
    }</td></tr>`,
  );
  const form: Html = allowed
    ? html`<form method="post" action="/keys" class="inline">
${csrfField(session)}
<label for="key-name">Name</label>
<input id="key-name" name="name" required maxlength="${String(NAME_MAX)}" placeholder="Open WebUI">
<button type="submit" class="button primary">Create key</button>
${extra.error ? html`<p class="error" role="alert">${extra.error}</p>` : ""}
</form>`
    : html`<p>Keys are for people who can push to a repository where vmpilot is installed; you cannot push to any.</p>`;
  const body = html`<h1>API keys</h1>
<p>Chat clients such as Open WebUI reach vmpilot at <code>${base}</code> with one of these keys.
A key acts with your rights: the <code>vmpilot</code> model (a scratch workspace) and
<code>vmpilot/&lt;owner&gt;/&lt;repo&gt;</code> for each repository you can push to. The list of
models offers the repositories GitHub listed for you when you last opened this page.</p>
${created}
${form}
${
  keys.length
    ? html`<table><thead><tr><th>Name</th><th>Key</th><th>Created (UTC)</th><th>Last used</th><th></th></tr></thead><tbody>${rows}</tbody></table>`
    : html`<p>You have no keys yet.</p>`
}`;
  send(
    ctx.res,
    extra.error ? 400 : 200,
    page({ title: "API keys", session, nav: "keys", body, scripts: ["/static/copy.js"] }),
  );
}

export async function keysPage(web: WebServices, ctx: RequestContext): Promise<void> {
  await render(web, ctx, requireSession(ctx));
}

export async function createKey(web: WebServices, ctx: RequestContext): Promise<void> {
  const session = requireSession(ctx);
  const form = await readForm(ctx.req);
  requireCsrf(session, form);
  if (!(await mayHaveKeys(web, session))) {
    throw new HttpError(
      403,
      "Keys are for people who can push to a repository where vmpilot is installed.",
    );
  }
  const name = (form.get("name") ?? "").trim();
  if (!name || name.length > NAME_MAX) {
    await render(web, ctx, session, {
      error: `Give the key a name of 1 to ${NAME_MAX} characters.`,
    });
    return;
  }
  const made = await createApiKey(web.pool, {
    name,
    ownerLogin: session.login,
    ownerId: session.userId,
  }).catch((error: unknown) => {
    if (error instanceof TooManyKeys) return error;
    throw error;
  });
  if (made instanceof TooManyKeys) {
    await render(web, ctx, session, { error: made.message });
    return;
  }
  const { secret } = made;
  // Shown in this response only; a reload does not make another key (the browser asks first).
  await render(web, ctx, session, { created: { name, secret } });
}

export async function revokeKey(web: WebServices, ctx: RequestContext): Promise<void> {
  const session = requireSession(ctx);
  const form = await readForm(ctx.req);
  requireCsrf(session, form);
  if (!(await revokeApiKey(web.pool, Number(ctx.params[0]), session.userId))) {
    throw new HttpError(404, "You have no such key.");
  }
  redirect(ctx.res, "/keys");
}
