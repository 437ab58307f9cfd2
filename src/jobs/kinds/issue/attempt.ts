// An issue job's attempt: the job row, the GitHub client, and the progress comment, which every
// way out of the job ends by editing exactly once more.
import type { ProbotOctokit } from "probot";
import { editComment, type Item, postComment } from "../../../github/comments.ts";
import { renderFailure, renderNotice, ThrottledComment } from "../../../github/progress-comment.ts";
import { renderConfigError } from "../../../github/repo-config-loader.ts";
import { redact } from "../../../log/redact.ts";
import { type JobContext, readJobContext } from "../../../store/job-context.ts";
import { type IssueJob, type JobStatus, updateJob } from "../../../store/jobs.ts";
import type { OpenDeps } from "../../run/deps.ts";
import type { Attempt } from "../../run/kind.ts";
import { JobProgress, jobUrl } from "../../run/progress.ts";
import type { SettingsRefusal } from "../../run/settings.ts";

export type PipelineOutcome = Extract<JobStatus, "succeeded" | "failed" | "refused" | "cancelled">;

export type AttemptDeps = Pick<
  OpenDeps,
  "db" | "auth" | "publicUrl" | "logger" | "progressIntervalMs"
>;

export interface IssueAttempt extends Attempt {
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
  failed(reason: string): Promise<PipelineOutcome>;
  cancelled(): Promise<PipelineOutcome>;
  limited(refusal: SettingsRefusal): Promise<PipelineOutcome>;
}

export async function openAttempt(deps: AttemptDeps, job: IssueJob): Promise<IssueAttempt> {
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

  const end: IssueAttempt["end"] = async (status, body, error) => {
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
  const notice: IssueAttempt["notice"] = (status, icon, headline, text) =>
    end(status, renderNotice({ ...view, icon, headline, text }));
  return {
    job,
    context,
    item,
    octokit,
    url,
    startedAt,
    progress,
    end,
    notice,
    limited(refusal) {
      if ("invalid" in refusal) {
        const { invalid } = refusal;
        const body = renderConfigError(invalid, { ...view, command: context.command });
        return end("failed", body, `invalid ${invalid.source}: ${invalid.message}`);
      }
      if ("disabled" in refusal) {
        const text = "This repository's settings say `enabled: false`.";
        return notice("refused", "⏸", "vmpilot is turned off here", text);
      }
      return notice("failed", "⏹", "Limit reached", refusal.limit);
    },
    cancelled: () =>
      notice("cancelled", "⏹", "Stopped", "The job was cancelled before it finished."),
    failed: (reason) =>
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
