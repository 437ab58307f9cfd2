import { type JobEvent, listJobEvents } from "../store/job-events.ts";
import { getJob, type Job, listJobs } from "../store/jobs.ts";
import { canViewJob, readableRepos } from "./access.ts";
import { requireSession } from "./auth.ts";
import type { RequestContext, WebServices } from "./context.ts";
import { type Html, html } from "./html.ts";
import { HttpError, send } from "./http.ts";
import { jobPage, jobsTable } from "./jobs-view.ts";
import { page } from "./layout.ts";

const PER_REPO = 50;

export async function jobList(web: WebServices, ctx: RequestContext): Promise<void> {
  const session = requireSession(ctx);
  const only = ctx.url.searchParams.get("repo")?.toLowerCase();
  const repos = (await readableRepos(web, session)).filter(
    (r) => !only || r.fullName.toLowerCase() === only,
  );
  const sections: Html[] = [];
  for (const repo of repos) {
    // A chat-face conversation is its owner's alone; they see it under their chat turns below.
    const jobs = await listJobs(web.pool, {
      repositoryId: repo.id,
      chatTurns: false,
      limit: PER_REPO,
    });
    if (jobs.length === 0) continue;
    sections.push(html`<section aria-labelledby="repo-${repo.id}">
<h2 id="repo-${repo.id}"><a href="/jobs?repo=${repo.fullName}">${repo.fullName}</a></h2>
${jobsTable(jobs, web.config.githubWebUrl)}
</section>`);
  }
  const chatTurns = only
    ? []
    : await listJobs(web.pool, {
        chatTurns: true,
        conversationOwnerId: session.userId,
        limit: PER_REPO,
      });
  if (chatTurns.length > 0) {
    sections.push(html`<section aria-labelledby="your-chat-turns">
<h2 id="your-chat-turns">Your chat turns</h2>
${jobsTable(chatTurns, web.config.githubWebUrl)}
</section>`);
  }
  const body = html`<h1>Jobs</h1>
${sections.length ? sections : html`<p>No jobs yet in the repositories you can read.</p>`}`;
  send(ctx.res, 200, page({ title: "Jobs", session, nav: "jobs", body }));
}

export async function jobDetail(web: WebServices, ctx: RequestContext): Promise<void> {
  const job = await viewableJob(web, ctx);
  const events = await allEvents(web, job.id);
  const body = jobPage(job, events, web.config.githubWebUrl);
  send(
    ctx.res,
    200,
    page({
      title: `Job #${job.id}`,
      session: ctx.session,
      nav: "jobs",
      body,
      scripts: job.finishedAt ? [] : ["/static/live.js"],
    }),
  );
}

/** The job named in the path, if this viewer may see it; 404 alike for missing and hidden. */
export async function viewableJob(web: WebServices, ctx: RequestContext): Promise<Job> {
  const id = Number(ctx.params[0]);
  const job = Number.isSafeInteger(id) ? await getJob(web.pool, id) : undefined;
  if (!job || !(await canViewJob(web, ctx.session, job))) {
    throw new HttpError(404, ctx.session ? "No such job." : "No such job. Signing in may show it.");
  }
  return job;
}

// A page bound: past this the log is cut (the live stream would carry on after it).
const MAX_EVENTS = 20_000;

async function allEvents(web: WebServices, jobId: number): Promise<JobEvent[]> {
  const events: JobEvent[] = [];
  while (events.length < MAX_EVENTS) {
    const batch = await listJobEvents(web.pool, jobId, events.at(-1)?.id ?? 0, 1000);
    events.push(...batch);
    if (batch.length < 1000) break;
  }
  return events;
}
