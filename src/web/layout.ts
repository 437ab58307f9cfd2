import { type Html, html } from "./html.ts";
import type { Session } from "./session.ts";

export interface PageOptions {
  title: string;
  session: Session | null;
  /** Which main navigation entry is the current page. */
  nav?: "jobs" | "settings" | "usage" | "keys";
  body: Html;
  scripts?: string[];
}

const NAV = [
  { key: "jobs", href: "/jobs", label: "Jobs" },
  { key: "settings", href: "/settings", label: "Settings" },
  { key: "usage", href: "/usage", label: "Usage" },
  { key: "keys", href: "/keys", label: "API keys" },
] as const;

export function page(options: PageOptions): Html {
  const { session } = options;
  const links = NAV.map(
    (item) =>
      html`<li><a href="${item.href}" ${options.nav === item.key ? html`aria-current="page"` : ""}>${item.label}</a></li>`,
  );
  const account = session
    ? html`<form method="post" action="/logout" class="account">
        <span>Signed in as <strong>${session.login}</strong></span>
        ${csrfField(session)}
        <button type="submit" class="link">Sign out</button>
      </form>`
    : html`<a class="account button" href="/login">Sign in with GitHub</a>`;
  const scripts = (options.scripts ?? []).map((src) => html`<script src="${src}" defer></script>`);
  return html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title} · vmpilot</title>
<link rel="stylesheet" href="/static/vmpilot.css">
${scripts}
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <nav aria-label="Main">
    <a class="brand" href="/">vmpilot</a>
    <ul>${links}</ul>
  </nav>
  ${account}
</header>
<main id="main" tabindex="-1">
${options.body}
</main>
</body>
</html>`;
}

export function csrfField(session: Session): Html {
  return html`<input type="hidden" name="csrf" value="${session.csrf}">`;
}

export function messagePage(session: Session | null, title: string, message: Html | string): Html {
  return page({ title, session, body: html`<h1>${title}</h1><p>${message}</p>` });
}
