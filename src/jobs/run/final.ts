// A job's final comment, whatever its kind: what the run cost and found, the headline of what went
// out, and the comment itself, written once on its item and edited by a later attempt.
import type { ProbotOctokit } from "probot";
import type { RepoSettings } from "../../config/repo-config.ts";
import { editComment, type Item, postComment } from "../../github/comments.ts";
import { type FinalView, renderFinal } from "../../github/progress-comment.ts";
import { type Job, updateJob } from "../../store/jobs.ts";
import { type JobRun, runCost, testsOf } from "./agent.ts";
import type { Delivered } from "./deliver.ts";
import type { OpenDeps } from "./deps.ts";
import type { JobProgress } from "./progress.ts";

/** What a final comment's cost line names: the job's model, and whether to show it at all. */
type Shown = Pick<RepoSettings, "model" | "showCost">;

/** What a final comment says of the run, whatever the run left behind. */
export function finalView(
  job: Pick<Job, "id">,
  progress: Pick<JobProgress, "view">,
  result: JobRun,
  settings: Shown,
) {
  return {
    jobId: job.id,
    jobUrl: progress.view.jobUrl,
    startedAt: progress.view.startedAt,
    // The job's so far: a kept run's counted once, as the attempt that delivers it spends nothing.
    cost: runCost(settings, result, progress.view.costUsd),
    tests: testsOf(result),
    notes: result.detail ? [result.detail] : [],
    ok: result.reason === "end_turn",
  };
}

/** What went out: a pull request opened or updated, a push to the one served, or nothing. */
function deliveredHeadline(
  delivered: Delivered,
  ok: boolean,
  served?: { number: number; url: string },
): Pick<FinalView, "ok" | "headline" | "pullRequest" | "changed"> {
  if (!delivered.pushed && !delivered.pullRequest) {
    // A run that ended on its own with nothing to push answered what it was asked.
    const headline = ok
      ? "Answered, without changing the code"
      : "Done: no changes to the code, so no pull request";
    return { ok, headline, changed: false };
  }
  const pr = delivered.pullRequest;
  if (pr) {
    const verb = pr.created ? "Opened draft pull request" : "Updated pull request";
    return {
      ok,
      headline: `${verb} #${pr.number}`,
      pullRequest: { number: pr.number, url: pr.url },
    };
  }
  return {
    ok,
    headline: `Pushed ${delivered.sha.slice(0, 10)} to this pull request`,
    pullRequest: served,
  };
}

/**
 * The final comment of a run whose work went out (deliver.ts), and its headline for the job log;
 * `of` names the run in the comment's headline.
 */
export function deliveredComment(
  job: Pick<Job, "id">,
  progress: Pick<JobProgress, "view">,
  result: JobRun,
  settings: Shown,
  delivered: Delivered,
  options: {
    /** Shown above the run's own notes (a CI fix: what failed). */
    notes?: readonly string[];
    /** The pull request a push to its branch served. */
    served?: { number: number; url: string };
    of?: string;
  } = {},
): { headline: string; body: string } {
  const base = finalView(job, progress, result, settings);
  const view = { ...base, notes: [...(options.notes ?? []), ...base.notes] };
  const done = deliveredHeadline(delivered, view.ok, options.served);
  const body = renderFinal({
    ...view,
    ...done,
    headline: options.of === undefined ? done.headline : `${done.headline} — ${options.of}`,
    summary: result.finalText,
    finishedAt: Date.now(),
  });
  return { headline: done.headline, body };
}

/** The job's comment on the item: the one an earlier attempt posted, edited, or a new one. */
export async function writeJobComment(
  deps: Pick<OpenDeps, "db">,
  octokit: ProbotOctokit,
  item: Item,
  job: Pick<Job, "id" | "progressCommentId">,
  body: string,
): Promise<void> {
  if (job.progressCommentId !== null) {
    await editComment(octokit, item, job.progressCommentId, body);
    return;
  }
  const commentId = await postComment(octokit, item, body);
  await updateJob(deps.db.pool, job.id, { progressCommentId: commentId });
}
