import { redact } from "../log/redact.ts";
import { storedUsage } from "../store/job-event-kinds.ts";
import type { JobEvent } from "../store/job-events.ts";
import type { Job } from "../store/jobs.ts";
import { type Html, html } from "./html.ts";
import { renderEvent, usd } from "./timeline.ts";

export function jobsTable(jobs: Job[], webUrl: string): Html {
  const rows = jobs.map(
    (job) => html`<tr>
  <td><a href="/jobs/${job.id}">#${job.id}</a></td>
  <td><span class="status status-${job.status}">${job.status}</span></td>
  <td>${triggerText(job)}</td>
  <td>${job.requester}</td>
  <td>${itemLink(job, webUrl, `#${job.number}`)}</td>
  <td>${job.prNumber ? html`<a href="${webUrl}/${job.repo}/pull/${job.prNumber}">#${job.prNumber}</a>` : "—"}</td>
  <td class="hide-narrow"><time datetime="${job.createdAt.toISOString()}">${day(job.createdAt)}</time></td>
  <td class="num">${duration(job)}</td>
  <td class="num">${usd(job.costUsd)}</td>
</tr>`,
  );
  return html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Job</th><th scope="col">Status</th><th scope="col">Trigger</th>
<th scope="col">Requester</th><th scope="col">Issue</th><th scope="col">PR</th>
<th scope="col" class="hide-narrow">Created</th><th scope="col" class="num">Duration</th>
<th scope="col" class="num">Cost</th></tr></thead>
<tbody>${rows}</tbody></table></div>`;
}

/** The header's tokens and cost, as the page shows them and its live stream updates them. */
export function jobSpent(job: Pick<Job, "usage" | "costUsd">): { tokens: string; cost: string } {
  const usage = storedUsage(job.usage);
  const tokens =
    usage.inputTokens +
    usage.outputTokens +
    usage.cacheCreationInputTokens +
    usage.cacheReadInputTokens;
  return { tokens: tokens.toLocaleString("en-US"), cost: usd(job.costUsd) };
}

export function jobPage(job: Job, events: JobEvent[], webUrl: string): Html {
  const live = job.finishedAt === null;
  const spent = jobSpent(job);
  const lastId = events.at(-1)?.id ?? 0;
  const title =
    job.number === null
      ? `${job.repo} conversation ${job.conversationId}`
      : `${job.repo}#${job.number}`;
  return html`<h1>Job #${job.id} · ${title}</h1>
<dl class="facts">
  <dt>Status</dt><dd><span id="job-status" class="status status-${job.status}" aria-live="polite">${job.status}</span></dd>
  <dt>Trigger</dt><dd>${triggerText(job)} by ${job.requester}</dd>
  <dt>Issue</dt><dd>${itemLink(job, webUrl, title)}</dd>
  <dt>Pull request</dt><dd>${job.prNumber ? html`<a href="${webUrl}/${job.repo}/pull/${job.prNumber}">#${job.prNumber}</a>` : "none yet"}</dd>
  <dt>Created</dt><dd><time datetime="${job.createdAt.toISOString()}">${job.createdAt.toISOString().replace("T", " ").slice(0, 19)} UTC</time></dd>
  <dt>Duration</dt><dd>${duration(job)}</dd>
  <dt>Tokens</dt><dd id="job-tokens">${spent.tokens}</dd>
  <dt>Cost</dt><dd id="job-cost">${spent.cost}</dd>
  ${job.error ? html`<dt>Error</dt><dd>${redact(job.error)}</dd>` : ""}
</dl>
<h2 id="log-heading">Job log</h2>
<p id="live" class="live" ${live ? "" : "hidden"}>Live: new steps appear as they happen.</p>
<ol id="timeline" class="timeline" aria-labelledby="log-heading" data-job="${job.id}"
  data-after="${lastId}" data-live="${live ? "true" : "false"}">${events.map(renderEvent)}</ol>
${events.length === 0 ? html`<p id="no-events" class="muted">No steps recorded yet.</p>` : ""}`;
}

/** The issue or pull request a job is on; a chat turn has none and says which conversation. */
function itemLink(job: Job, webUrl: string, label: string): Html | string {
  if (job.number === null) return `conversation ${job.conversationId}`;
  return html`<a href="${webUrl}/${job.repo}/issues/${job.number}">${label}</a>`;
}

function triggerText(job: Job): string {
  return job.command ? `${job.trigger} · ${job.command}` : job.trigger;
}

function duration(job: Job, now = Date.now()): string {
  const start = (job.startedAt ?? job.createdAt).getTime();
  const end = job.finishedAt?.getTime() ?? now;
  const seconds = Math.max(0, Math.round((end - start) / 1000));
  const text =
    seconds < 60
      ? `${seconds} s`
      : seconds < 3600
        ? `${Math.floor(seconds / 60)} min ${seconds % 60} s`
        : `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  return job.finishedAt ? text : `${text} so far`;
}

function day(at: Date): string {
  return at.toISOString().slice(0, 10);
}
