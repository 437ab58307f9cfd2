// Runs queued jobs in this process: the acknowledgement, then the agent pipeline; or a turn of
// the chat face; or a scheduled automation's run.
import { editComment, postComment } from "../github/comments.ts";
import { jobDuration } from "../metrics.ts";
import { readJobContext } from "../store/job-context.ts";
import { getJob, isIssueJob, updateJob } from "../store/jobs.ts";
import { handleAutomationMessage } from "./automations/schedules.ts";
import { runChatTurn } from "./kinds/chat-turn/run.ts";
import { runConfigCheck } from "./kinds/config-check/run.ts";
import {
  type AcknowledgeDeps,
  acknowledge,
  acknowledgeWaiting,
} from "./kinds/issue/acknowledge.ts";
import { deadBody } from "./kinds/issue/acknowledge-messages.ts";
import { type MergeablePoll, mergeWanted } from "./kinds/issue/merge-gate.ts";
import { type PipelineDeps, runPipeline } from "./kinds/issue/run.ts";
import { runReadyCheck } from "./kinds/ready/run.ts";
import { isScheduledRun, runScheduledAutomation } from "./kinds/scheduled/run.ts";
import type { DeadJob, Queue } from "./queue/queue.ts";

export interface WorkerDeps extends AcknowledgeDeps {
  queue: Queue;
  /** Omitted, jobs end once acknowledged; the intake tests run the worker that way. */
  pipeline?: PipelineDeps;
  /** How long a job for a moved base waits for GitHub to know whether the pull request merges. */
  mergeablePoll?: MergeablePoll;
  /**
   * The app's slug, for the jobs of scheduled automations (the app is their requester). Without
   * it this worker takes no automation messages.
   */
  appSlug?: () => Promise<string>;
}

export async function startWorker(deps: WorkerDeps): Promise<void> {
  const { appSlug } = deps;
  await deps.queue.work(
    async (run) => {
      const end = jobDuration.startTimer();
      let outcome = "retry";
      try {
        const job = await getJob(deps.db.pool, run.jobId);
        const trigger = job?.trigger;
        if (job && isScheduledRun(job)) {
          outcome = deps.pipeline ? await runScheduledAutomation(run, deps.pipeline) : "skipped";
          return;
        }
        if (trigger === "chat") {
          const pipeline = deps.pipeline && { ...deps.pipeline, allowedUsers: deps.allowedUsers };
          outcome = pipeline ? await runChatTurn(run, pipeline) : "skipped";
          return;
        }
        if (trigger === "base_push" && !(await mergeWanted(deps, run))) {
          outcome = "ignored";
          return;
        }
        const ack = await acknowledge(deps, run);
        outcome = ack.outcome;
        if (ack.outcome === "acknowledged" && deps.pipeline) {
          outcome = await runPipeline(run, deps.pipeline, ack.repoConfig);
        }
      } finally {
        end({ outcome });
      }
    },
    {
      onDead: (dead) => reportDead(deps, dead),
      onNotice: (jobId, signal) => acknowledgeWaiting(deps, jobId, signal),
      onConfigCheck: (check, signal) => runConfigCheck(deps, check, signal),
      onReady: (check, signal) => runReadyCheck(deps, check, signal),
      ...(appSlug && {
        onAutomation: (message, id, signal) =>
          handleAutomationMessage({ ...deps, appSlug }, message, id, signal),
      }),
    },
  );
}

/** Tells the requester that the job gave up, in the job's own comment when it has one. */
export async function reportDead(deps: AcknowledgeDeps, dead: DeadJob): Promise<void> {
  const job = await getJob(deps.db.pool, dead.jobId);
  // A chat turn's client saw the failure in its stream; there is no comment to write.
  if (!job || !isIssueJob(job)) return;
  const context = readJobContext(job);
  const item = { owner: context.owner, repo: context.name, number: job.number };
  const octokit = await deps.auth(job.installationId);
  const body = deadBody(job, context, dead.error, deps.publicUrl);
  if (job.progressCommentId !== null) {
    await editComment(octokit, item, job.progressCommentId, body);
  } else {
    const commentId = await postComment(octokit, item, body);
    await updateJob(deps.db.pool, job.id, { progressCommentId: commentId });
  }
}
