import { readableRepos } from "./access.ts";
import { requireSession } from "./auth.ts";
import { type Bar, barChart } from "./chart.ts";
import type { RequestContext, WebServices } from "./context.ts";
import { html } from "./html.ts";
import { send } from "./http.ts";
import { page } from "./layout.ts";
import { type UsageRow, usageByDay } from "./queries.ts";
import { usd } from "./timeline.ts";

const DAYS = 30;

export async function usagePage(web: WebServices, ctx: RequestContext): Promise<void> {
  const session = requireSession(ctx);
  const repos = await readableRepos(web, session);
  const rows = await usageByDay(
    web.pool,
    repos.map((r) => r.id),
    DAYS,
    session.userId,
  );
  const total = rows.reduce((sum, r) => sum + r.costUsd, 0);
  const body = html`<h1>Usage</h1>
<p>Tokens and cost of the last ${DAYS} days (UTC) in the repositories you can read, and your scratch chats:
<strong>${usd(total)}</strong> in total.</p>
${barChart(dailyBars(rows), `Cost per day, all repositories, last ${DAYS} days`, usd)}
${rows.length ? usageTable(rows) : html`<p>No jobs in the last ${DAYS} days.</p>`}`;
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
    ) => html`<tr><td>${r.day}</td><td>${r.repo === "scratch" ? "scratch chats" : html`<a href="/jobs?repo=${r.repo}">${r.repo}</a>`}</td>
<td class="num">${n(r.jobs)}</td><td class="num">${n(r.inputTokens)}</td><td class="num">${n(r.outputTokens)}</td>
<td class="num hide-narrow">${n(r.cacheTokens)}</td><td class="num">${usd(r.costUsd)}</td></tr>`,
  )}</tbody></table></div>`;
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
