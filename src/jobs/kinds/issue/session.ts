// One attempt's connection to the outside: the job row, the GitHub client, and the progress
// comment, which every way out of the pipeline ends by editing exactly once more.
import type { ProbotOctokit } from "probot";
import { editComment, type Item, postComment } from "../../../github/comments.ts";
import { renderFailure, renderNotice, ThrottledComment } from "../../../github/progress-comment.ts";
import type { Logger } from "../../../log/logger.ts";
import { redact } from "../../../log/redact.ts";
import type { Database } from "../../../store/database.ts";
import { type JobContext, readJobContext } from "../../../store/job-context.ts";
import { type IssueJob, type JobStatus, updateJob } from "../../../store/jobs.ts";
import { JobProgress } from "../../run/progress.ts";
import { jobUrl } from "./acknowledge-messages.ts";

export type PipelineOutcome = Extract<JobStatus, "succeeded" | "failed" | "refused" | "cancelled">;

export interface SessionDeps {
  db: Database;
  auth(installationId: number): Promise<ProbotOctokit>;
  publicUrl: string;
  logger: Logger;
  progressIntervalMs?: number;
}

export interface Session {
  job: IssueJob;
  context: JobContext;
  item: Item;
  octokit: ProbotOctokit;
  url: string;
  startedAt: number;
  progress: JobProgress;
  /** Writes the final comment (a failed edit is only logged) and the job's final status. */
  end(status: PipelineOutcome, body: string, error?: string): Promise<PipelineOutcome>;
  notice(
    status: PipelineOutcome,
    icon: string,
    headline: string,
    text: string,
  ): Promise<PipelineOutcome>;
  fail(reason: string): Promise<PipelineOutcome>;
  /** Another attempt will follow: say so, and stop editing the comment. */
  retrying(attempt: number): Promise<void>;
}

export async function openSession(deps: SessionDeps, job: IssueJob): Promise<Session> {
  const db = deps.db.pool;
  const context = readJobContext(job);
  const item: Item = { owner: context.owner, repo: context.name, number: job.number };
  const octokit = await deps.auth(job.installationId);
  const url = jobUrl(deps.publicUrl, job.id);
  const startedAt = Date.now();
  const view = { jobId: job.id, jobUrl: url };
  // Acknowledgement posted the comment; posting here only covers a job that skipped it.
  let commentId = job.progressCommentId;
  if (commentId === null) {
    commentId = await postComment(
      octokit,
      item,
      `⏳ vmpilot is starting — [job #${job.id}](${url})`,
    );
    await updateJob(db, job.id, { progressCommentId: commentId });
  }
  const id = commentId;
  const comment = new ThrottledComment({
    edit: (body) => editComment(octokit, item, id, body),
    intervalMs: deps.progressIntervalMs,
    onError: (error) =>
      deps.logger.warn({ err: error, jobId: job.id }, "progress comment edit failed"),
  });
  const progress = new JobProgress({
    db,
    jobId: job.id,
    comment,
    view: { ...view, current: "workspace", startedAt, costUsd: job.costUsd },
    baseCostUsd: job.costUsd,
    logger: deps.logger,
  });

  const end: Session["end"] = async (status, body, error) => {
    progress.stop();
    await progress.flush();
    try {
      await comment.finish(body);
    } catch (failure) {
      // The outcome stands; a comment GitHub would not take is logged, not retried with the job.
      deps.logger.error({ err: failure, jobId: job.id }, "final comment edit failed");
    }
    await updateJob(db, job.id, { status, ...(error !== undefined && { error }) });
    return status;
  };
  return {
    job,
    context,
    item,
    octokit,
    url,
    startedAt,
    progress,
    end,
    notice: (status, icon, headline, text) =>
      end(status, renderNotice({ ...view, icon, headline, text })),
    fail: (reason) =>
      end(
        "failed",
        renderFailure({
          ...view,
          reason,
          command: context.command,
          startedAt,
          finishedAt: Date.now(),
          costUsd: progress.view.costUsd,
        }),
        redact(reason).slice(0, 2000),
      ),
    async retrying(attempt) {
      progress.stop();
      await progress.flush();
      const body = renderNotice({
        ...view,
        icon: "🔁",
        headline: "Retrying",
        text: `Attempt ${attempt} failed; vmpilot will try again shortly.`,
      });
      await comment.finish(body).catch(() => undefined);
    },
  };
}
