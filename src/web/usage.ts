import { startOfUtcMonth } from "../jobs/run/settings.ts";
import { OPERATOR_SPENDER, spentBySpender } from "../store/spenders.ts";
import { readableRepos } from "./access.ts";
import { requireSession } from "./auth.ts";
import { type Bar, barChart } from "./chart.ts";
import type { RequestContext, WebServices } from "./context.ts";
import { html } from "./html.ts";
import { send } from "./http.ts";
import { page } from "./layout.ts";
import { type PersonUsageRow, type UsageRow, usageByDay, usageByPerson } from "./queries.ts";
import { usd } from "./timeline.ts";

const DAYS = 30;

export async function usagePage(web: WebServices, ctx: RequestContext): Promise<void> {
  const session = requireSession(ctx);
  const repos = await readableRepos(web, session);
  const repositoryIds = repos.map((r) => r.id);
  const rows = await usageByDay(web.pool, repositoryIds, DAYS, session.userId);
  const people = await usageByPerson(web.pool, repositoryIds, DAYS, session.userId);
  // The viewer's own month counts everywhere, as their monthly budget does.
  const month = await spentBySpender(web.pool, String(session.userId), startOfUtcMonth(new Date()));
  const total = rows.reduce((sum, r) => sum + r.costUsd, 0);
  const body = html`<h1>Usage</h1>
<p>Tokens and cost of the last ${DAYS} days (UTC) in the repositories you can read, and your scratch conversations:
<strong>${usd(total)}</strong> in total.</p>
<p>Your own jobs and chat turns this month (UTC), in every repository: <strong>${usd(month)}</strong>
(what a repository's <code>maxMonthlyCostUsdPerUser</code> counts).</p>
${barChart(dailyBars(rows), `Cost per day, all repositories, last ${DAYS} days`, usd)}
${rows.length ? html`${peopleTable(people)}${usageTable(rows)}` : html`<p>No jobs in the last ${DAYS} days.</p>`}`;
  send(ctx.res, 200, page({ title: "Usage", session, nav: "usage", body }));
}

function usageTable(rows: UsageRow[]) {
  const n = (v: number) => v.toLocaleString("en-US");
  return html`<div class="table-wrap"><table>
<caption class="muted">Per repository per day</caption>
<thead><tr><th scope="col">Day</th><th scope="col">Repository</th><th scope="col" class="num">Jobs</th>
<th scope="col" class="num">Input tokens</th><th scope="col" class="num">Output tokens</th>
<th scope="col" class="num hide-narrow">Cache tokens</th><th scope="col" class="num">Cost</th></tr></thead>
<tbody>${rows.map(
    (
      r,
    ) => html`<tr><td>${r.day}</td><td>${r.repo === "scratch" ? "scratch conversations" : html`<a href="/jobs?repo=${r.repo}">${r.repo}</a>`}</td>
<td class="num">${n(r.jobs)}</td><td class="num">${n(r.inputTokens)}</td><td class="num">${n(r.outputTokens)}</td>
<td class="num hide-narrow">${n(r.cacheTokens)}</td><td class="num">${usd(r.costUsd)}</td></tr>`,
  )}</tbody></table></div>`;
}

/**
 * Who spent what: an issue job's requester, a chat turn's key owner, the operator's key, an app.
 */
function peopleTable(rows: PersonUsageRow[]) {
  const n = (v: number) => v.toLocaleString("en-US");
  return html`<div class="table-wrap"><table>
<caption class="muted">Per person, last ${DAYS} days</caption>
<thead><tr><th scope="col">Person</th><th scope="col" class="num">Jobs</th>
<th scope="col" class="num">Input tokens</th><th scope="col" class="num">Output tokens</th>
<th scope="col" class="num">Cost</th></tr></thead>
<tbody>${rows.map(
    (r) => html`<tr><td>${personName(r)}</td><td class="num">${n(r.jobs)}</td>
<td class="num">${n(r.inputTokens)}</td><td class="num">${n(r.outputTokens)}</td><td class="num">${usd(r.costUsd)}</td></tr>`,
  )}</tbody></table></div>`;
}

function personName(row: PersonUsageRow) {
  if (row.spender === OPERATOR_SPENDER) return "operator key";
  if (row.spender === null) return html`<span class="muted">conversations of no known owner</span>`;
  if (row.spender.startsWith("app:")) return html`${row.login} <span class="muted">(an app)</span>`;
  if (row.spender.startsWith("login:")) {
    return html`${row.login} <span class="muted">(jobs without a user id)</span>`;
  }
  return row.login ?? "";
}

/** One bar per day, oldest first, with the days without jobs at zero. */
function dailyBars(rows: UsageRow[], now = new Date()): Bar[] {
  const perDay = new Map<string, number>();
  for (const row of rows) perDay.set(row.day, (perDay.get(row.day) ?? 0) + row.costUsd);
  const bars: Bar[] = [];
  for (let i = DAYS - 1; i >= 0; i--) {
    const day = new Date(now.getTime() - i * 86_400_000).toISOString().slice(0, 10);
    const cost = perDay.get(day) ?? 0;
    bars.push({ label: day.slice(5), value: cost, title: `${day}: ${usd(cost)}` });
  }
  return bars;
}
