// A job's first step: is the requester allowed, and the bot's first visible answer. Safe to rerun
// after a crash: the answer is one comment per job, found again by id or marker, never duplicated.
import { setTimeout as delay } from "node:timers/promises";
import type { ProbotOctokit } from "probot";
import type { RepoSettings } from "../config/repo-config.ts";
import {
  editComment,
  findMarkedComment,
  type Item,
  jobMarker,
  postComment,
} from "../github/comments.ts";
import { addEyes } from "../github/reactions.ts";
import type { RepoConfigLoad } from "../github/repo-config-loader.ts";
import type { Logger } from "../log/logger.ts";
import type { Database } from "../store/database.ts";
import { type JobContext, readJobContext } from "../store/job-context.ts";
import { claimNotice } from "../store/job-lifecycle.ts";
import { getIssueJob, type IssueJob, listJobs, updateJob } from "../store/jobs.ts";
import { claimRefusalNotice } from "../store/refusal-notices.ts";
import {
  helpBody,
  progressBody,
  queuedBody,
  refusalBody,
  statusBody,
  stopBody,
} from "./acknowledge-messages.ts";
import { ciFixUnwanted } from "./ci-admit.ts";
import type { Queue, RunningJob } from "./queue.ts";
import { loadTriggerSettings, mayTrigger, unwanted } from "./trigger-settings.ts";

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

/** Jobs the app starts itself: they answer no one's comment, so they add no 👀. */
const APP_TRIGGERS: ReadonlySet<string> = new Set(["ci", "base_push", "automation"]);

/** Verbs answered at once; they never wait behind the conversation's running job. */
export const CONTROL_VERBS: ReadonlySet<string> = new Set(["stop", "status", "help"]);

/** How long a starting job waits for the notice that claimed its first comment to post it. */
const NOTICE_WAIT_MS = 20_000;
const NOTICE_POLL_MS = 100;

interface Notice {
  /** The first unfinished job ahead in the conversation, and how many more are ahead. */
  ahead: number;
  waiting: number;
}

export async function acknowledge(
  deps: AcknowledgeDeps,
  run: Pick<RunningJob, "jobId" | "attempt" | "signal">,
): Promise<Acknowledgement> {
  let job = await getIssueJob(deps.db.pool, run.jobId);
  if (!job) throw new Error(`job ${run.jobId} does not exist`);
  if (job.finishedAt) return { outcome: "skipped" };
  if (job.noticedAt && job.progressCommentId === null) {
    job = await noticeComment(deps, job, run.signal);
  }
  const context = readJobContext(job);
  const octokit = await deps.auth(job.installationId);
  const trigger = await loadTriggerSettings(deps.db, octokit, job, context, deps.defaults);
  const outcome = await respond(deps, run, job, context, octokit, trigger.settings);
  const repoConfig = await trigger.repoConfig;
  return outcome === "acknowledged" ? { outcome, repoConfig } : { outcome };
}

/**
 * The notice of a job that arrived while its conversation's job ran: 👀 and a comment saying what it
 * waits behind, at once, instead of when the job starts. Nothing when the job needs no notice (see
 * claimNotice). The job's own acknowledgement later edits the same comment.
 */
export async function acknowledgeWaiting(
  deps: AcknowledgeDeps,
  jobId: number,
  signal: AbortSignal,
): Promise<void> {
  const notice = await claimNotice(deps.db.pool, jobId, [...CONTROL_VERBS]);
  if (!notice) return;
  const job = await getIssueJob(deps.db.pool, jobId);
  if (!job) return;
  const context = readJobContext(job);
  const octokit = await deps.auth(job.installationId);
  const trigger = await loadTriggerSettings(deps.db, octokit, job, context, deps.defaults);
  await respond(deps, { attempt: 1, signal }, job, context, octokit, trigger.settings, notice);
  await trigger.repoConfig;
}

/**
 * The job started in the instant after a notice claimed its first comment: the notice is posting
 * it now. Waits for the comment's id; a notice that died meanwhile leaves the comment to be found
 * by its marker (answerOnce).
 */
async function noticeComment(
  deps: AcknowledgeDeps,
  job: IssueJob,
  signal: AbortSignal,
): Promise<IssueJob> {
  for (let waited = 0; waited < NOTICE_WAIT_MS; waited += NOTICE_POLL_MS) {
    const now = await getIssueJob(deps.db.pool, job.id);
    if (!now || now.progressCommentId !== null || now.finishedAt) return now ?? job;
    await delay(NOTICE_POLL_MS, undefined, { signal });
  }
  return job;
}

async function respond(
  deps: AcknowledgeDeps,
  run: Pick<RunningJob, "attempt" | "signal">,
  job: IssueJob,
  context: JobContext,
  octokit: ProbotOctokit,
  settings: RepoSettings,
  notice?: Notice,
): Promise<Acknowledgement["outcome"]> {
  const item: Item = { owner: context.owner, repo: context.name, number: job.number };
  const why =
    unwanted(job, context, settings) ??
    (job.trigger === "ci"
      ? await ciFixUnwanted(deps.db.pool, octokit, job, context, settings)
      : undefined);
  if (why) {
    deps.logger.info({ jobId: job.id, why }, "ignored");
    await updateJob(deps.db.pool, job.id, { status: "ignored" });
    return "ignored";
  }
  const automation = job.trigger === "automation" ? context.automation : undefined;
  if (automation?.authors === "any" && !(job.command === "triage" && automation.labels?.length)) {
    // The file's check refuses it; a job recorded before it did must not run either: anyone's
    // issue may steer a triage that applies only the labels the file names, nothing else.
    deps.logger.warn(
      { jobId: job.id },
      "automation with authors: any refused: not a triage with labels",
    );
    await updateJob(deps.db.pool, job.id, { status: "refused" });
    return "refused";
  }
  const policy = settings.triggerPolicy;
  // The app itself starts a CI fix (no comment can name that trigger), for work its requester
  // was allowed to ask for; an automation, for the issues of whom the file says (authors).
  const permission =
    job.trigger === "ci" || automation?.authors === "any"
      ? { allowed: true, via: "app" }
      : await mayTrigger(
          octokit,
          {
            owner: item.owner,
            repo: item.repo,
            username: automation?.author ?? job.requester,
            allowedUsers: deps.allowedUsers,
          },
          settings,
        );
  run.signal.throwIfAborted();
  if (automation && !permission.allowed) {
    // Nobody asked: an issue whose author may not start the automation is simply not its work.
    deps.logger.info(
      { jobId: job.id, author: automation.author },
      "automation not for this author",
    );
    await updateJob(deps.db.pool, job.id, { status: "ignored" });
    return "ignored";
  }
  // An earlier attempt, or a notice that claimed the comment, may have posted it unrecorded.
  const posted = run.attempt > 1 || (job.noticedAt !== null && !notice);
  const answer = (body: string) => answerOnce(deps, octokit, item, job, posted, body);
  if (!permission.allowed) {
    deps.logger.info({ jobId: job.id, requester: job.requester, via: permission.via }, "refused");
    // Someone without access could otherwise make the bot post once per comment they write.
    const notice = { conversationId: job.conversationId, login: job.requester, jobId: job.id };
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
      if (notice) {
        if (!APP_TRIGGERS.has(job.trigger)) await addEyes(octokit, item, context.target);
        await answer(queuedBody(job, notice.ahead, notice.waiting, deps.publicUrl));
        deps.logger.info({ jobId: job.id, ahead: notice.ahead }, "acknowledged while waiting");
        return "acknowledged";
      }
      // A stored comment id means an earlier attempt got past the reaction; a notice reacted too.
      // The app's own job (a moved base) answers no one's comment.
      if (
        job.progressCommentId === null &&
        job.noticedAt === null &&
        !APP_TRIGGERS.has(job.trigger)
      ) {
        await addEyes(octokit, item, context.target);
      }
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
  /** The comment may have been posted before without its id being stored. */
  posted: boolean,
  body: string,
): Promise<number> {
  let commentId = job.progressCommentId ?? undefined;
  if (commentId === undefined && posted) {
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

const RUNNING: ReadonlySet<string> = new Set(["running", "acknowledged"]);

async function status(deps: AcknowledgeDeps, job: IssueJob): Promise<string> {
  const jobs = await listJobs(deps.db.pool, { conversationId: job.conversationId, limit: 50 });
  const work = jobs.filter(
    (other) => other.id !== job.id && !CONTROL_VERBS.has(other.command ?? ""),
  );
  // Newest first: show the running job if there is one, else the newest.
  const latest = work.find((other) => RUNNING.has(other.status)) ?? work[0];
  const queued = work.filter((other) => other.status === "queued" && other !== latest).reverse();
  return statusBody(job, latest, queued, deps.publicUrl);
}

async function stop(deps: AcknowledgeDeps, job: IssueJob): Promise<number[]> {
  const unfinished = await listJobs(deps.db.pool, {
    conversationId: job.conversationId,
    unfinished: true,
  });
  const stopped: number[] = [];
  for (const other of unfinished) {
    if (other.id === job.id || CONTROL_VERBS.has(other.command ?? "")) continue;
    if ((await deps.queue.cancel(other.id)) !== "finished") stopped.push(other.id);
  }
  deps.logger.info({ jobId: job.id, stopped }, "stop");
  return stopped.sort((a, b) => a - b);
}
