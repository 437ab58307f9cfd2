// A job's first step: is the requester allowed, and the bot's first visible answer. Safe to rerun
// after a crash: the answer is one comment per job, found again by id or marker, never duplicated.
import type { ProbotOctokit } from "probot";
import type { RepoSettings } from "../config/repo-config.ts";
import {
  editComment,
  findMarkedComment,
  type Item,
  jobMarker,
  postComment,
} from "../github/comments.ts";
import { type JobContext, readJobContext } from "../github/job-context.ts";
import type { Logger } from "../github/logger.ts";
import { checkPermission } from "../github/permissions.ts";
import { addEyes } from "../github/reactions.ts";
import type { RepoConfigLoad } from "../github/repo-config-loader.ts";
import type { Database } from "../store/database.ts";
import { getIssueJob, type IssueJob, listJobs, updateJob } from "../store/jobs.ts";
import { claimRefusalNotice } from "../store/refusal-notices.ts";
import {
  helpBody,
  progressBody,
  refusalBody,
  statusBody,
  stopBody,
} from "./acknowledge-messages.ts";
import type { Queue, RunningJob } from "./queue.ts";
import { loadTriggerSettings, unwanted } from "./trigger-settings.ts";

export interface AcknowledgeDeps {
  db: Database;
  queue: Pick<Queue, "cancel">;
  /** An installation-authenticated client (Probot's `app.auth(installationId)`). */
  auth(installationId: number): Promise<ProbotOctokit>;
  /** ALLOWED_USERS: may trigger on every repository. */
  allowedUsers: readonly string[];
  /** The worker's defaults, as the settings page shows them (the label, above all). */
  defaults?: RepoSettings;
  publicUrl: string;
  logger: Logger;
}

export type Acknowledgement =
  | { outcome: "refused" | "ignored" | "answered" | "skipped" }
  /** The pipeline goes on with the repository's config as read here. */
  | { outcome: "acknowledged"; repoConfig: RepoConfigLoad };

/** Verbs answered at once; they never wait behind the chat's running job. */
export const CONTROL_VERBS: ReadonlySet<string> = new Set(["stop", "status", "help"]);

export async function acknowledge(
  deps: AcknowledgeDeps,
  run: Pick<RunningJob, "jobId" | "attempt" | "signal">,
): Promise<Acknowledgement> {
  const job = await getIssueJob(deps.db.pool, run.jobId);
  if (!job) throw new Error(`job ${run.jobId} does not exist`);
  if (job.finishedAt) return { outcome: "skipped" };
  const context = readJobContext(job);
  const octokit = await deps.auth(job.installationId);
  const trigger = await loadTriggerSettings(deps.db, octokit, job, context, deps.defaults);
  const outcome = await respond(deps, run, job, context, octokit, trigger.settings);
  const repoConfig = await trigger.repoConfig;
  return outcome === "acknowledged" ? { outcome, repoConfig } : { outcome };
}

async function respond(
  deps: AcknowledgeDeps,
  run: Pick<RunningJob, "attempt" | "signal">,
  job: IssueJob,
  context: JobContext,
  octokit: ProbotOctokit,
  settings: RepoSettings,
): Promise<Acknowledgement["outcome"]> {
  const item: Item = { owner: context.owner, repo: context.name, number: job.number };
  const why = unwanted(job, context, settings);
  if (why) {
    deps.logger.info({ jobId: job.id, why }, "ignored");
    await updateJob(deps.db.pool, job.id, { status: "ignored" });
    return "ignored";
  }
  const policy = settings.triggerPolicy;
  const permission = await checkPermission(octokit, {
    owner: item.owner,
    repo: item.repo,
    username: job.requester,
    allowedUsers: [...deps.allowedUsers, ...settings.allowedUsers],
    policy,
  });
  run.signal.throwIfAborted();
  const answer = (body: string) => answerOnce(deps, octokit, item, job, run.attempt, body);
  if (!permission.allowed) {
    deps.logger.info({ jobId: job.id, requester: job.requester, via: permission.via }, "refused");
    // Someone without access could otherwise make the bot post once per comment they write.
    const notice = { chatId: job.chatId, login: job.requester, jobId: job.id };
    if (await claimRefusalNotice(deps.db.pool, notice)) await answer(refusalBody(job, policy));
    await updateJob(deps.db.pool, job.id, { status: "refused" });
    return "refused";
  }
  switch (job.command) {
    case "help":
      await answer(helpBody(job, context));
      return "answered";
    case "status":
      await answer(await status(deps, job));
      return "answered";
    case "stop":
      await answer(stopBody(job, await stop(deps, job), deps.publicUrl));
      return "answered";
    default:
      // A stored comment id means an earlier attempt got past the reaction.
      if (job.progressCommentId === null) await addEyes(octokit, item, context.target);
      await answer(progressBody(job, deps.publicUrl));
      await updateJob(deps.db.pool, job.id, { status: "acknowledged" });
      deps.logger.info({ jobId: job.id }, "acknowledged");
      return "acknowledged";
  }
}

/**
 * Posts the job's comment, or edits it when an earlier attempt already posted it: known by the id
 * stored on the job, or — when the crash came between posting and storing — by its marker.
 */
async function answerOnce(
  deps: AcknowledgeDeps,
  octokit: ProbotOctokit,
  item: Item,
  job: IssueJob,
  attempt: number,
  body: string,
): Promise<number> {
  let commentId = job.progressCommentId ?? undefined;
  if (commentId === undefined && attempt > 1) {
    commentId = await findMarkedComment(octokit, item, jobMarker(job.id), job.createdAt);
  }
  if (commentId === undefined) {
    commentId = await postComment(octokit, item, body);
  } else {
    await editComment(octokit, item, commentId, body);
  }
  if (job.progressCommentId !== commentId) {
    await updateJob(deps.db.pool, job.id, { progressCommentId: commentId });
  }
  return commentId;
}

async function status(deps: AcknowledgeDeps, job: IssueJob): Promise<string> {
  const jobs = await listJobs(deps.db.pool, { chatId: job.chatId, limit: 50 });
  const work = jobs.filter(
    (other) => other.id !== job.id && !CONTROL_VERBS.has(other.command ?? ""),
  );
  // Newest first: show the running job if there is one, else the newest.
  const latest = work.find((other) => other.status === "running") ?? work[0];
  const waiting = work.filter((other) => other.status === "queued" && other !== latest).length;
  return statusBody(job, latest, waiting, deps.publicUrl);
}

async function stop(deps: AcknowledgeDeps, job: IssueJob): Promise<number[]> {
  const unfinished = await listJobs(deps.db.pool, { chatId: job.chatId, unfinished: true });
  const stopped: number[] = [];
  for (const other of unfinished) {
    if (other.id === job.id || CONTROL_VERBS.has(other.command ?? "")) continue;
    if ((await deps.queue.cancel(other.id)) !== "finished") stopped.push(other.id);
  }
  deps.logger.info({ jobId: job.id, stopped }, "stop");
  return stopped.sort((a, b) => a - b);
}
