// An issue job's admission: where it stands, whether it is still wanted, what the gate's refusal
// says, and the bot's first visible answer (👀 and the job's comment, or the answer to a control
// verb). Safe to rerun after a crash: the answer is one comment per job, found again by id or
// marker, never duplicated.
import { setTimeout as delay } from "node:timers/promises";
import type { ProbotOctokit } from "probot";
import type { RepoSettings } from "../../../config/repo-config.ts";
import {
  editComment,
  findMarkedComment,
  type Item,
  jobMarker,
  postComment,
} from "../../../github/comments.ts";
import { addEyes } from "../../../github/reactions.ts";
import { type JobContext, readJobContext } from "../../../store/job-context.ts";
import { claimNotice } from "../../../store/job-lifecycle.ts";
import { getIssueJob, type IssueJob, listJobs, updateJob } from "../../../store/jobs.ts";
import { claimRefusalNotice } from "../../../store/refusal-notices.ts";
import { CONTROL_VERBS } from "../../queue/job-queue.ts";
import type { OpenDeps, Run } from "../../run/deps.ts";
import { type GateResult, gate, type Starter } from "../../run/gate.ts";
import {
  type Admitted,
  type Admitting,
  type Ended,
  type Place,
  repositoryOf,
  type Unwanted,
} from "../../run/kind.ts";
import { triggerSettings } from "../../run/settings.ts";
import {
  helpBody,
  progressBody,
  queuedBody,
  refusalBody,
  statusBody,
  stopBody,
} from "./acknowledge-messages.ts";
import { ciFixUnwanted } from "./ci-admit.ts";
import { mergeUnwanted } from "./merge-gate.ts";

/** Jobs the app starts itself: they answer no one's comment, so they add no 👀. */
const APP_TRIGGERS: ReadonlySet<string> = new Set(["ci", "base_push", "automation"]);

/** How long a starting job waits for the notice that claimed its first comment to post it. */
const NOTICE_WAIT_MS = 20_000;
const NOTICE_POLL_MS = 100;

interface Notice {
  /** The first unfinished job ahead in the conversation, and how many more are ahead. */
  ahead: number;
  waiting: number;
}

/**
 * Whom the job acts for. The app itself starts a CI fix (no comment can name that trigger), for
 * work its requester was allowed to ask for; the merge of a moved base continues its requester's
 * work, and checks them again; an automation acts for the issue's author, whom the file lets start
 * it (authors).
 */
function issueStarter(job: IssueJob, context: JobContext): Starter {
  if (job.trigger === "ci") return { app: "CI failed on the head vmpilot pushed" };
  const automation = job.trigger === "automation" ? context.automation : undefined;
  if (automation?.authors === "any") return { app: `automation ${automation.name}` };
  if (automation) return { person: { login: automation.author } };
  return {
    person: {
      login: job.requester,
      ...(context.requesterId !== undefined && { id: context.requesterId }),
    },
  };
}

export async function issuePlace(
  job: IssueJob,
  deps: OpenDeps,
): Promise<Place | { refused: string }> {
  const context = readJobContext(job);
  const automation = job.trigger === "automation" ? context.automation : undefined;
  if (automation?.authors === "any" && !(job.command === "triage" && automation.labels?.length)) {
    // The file's check refuses it; a job recorded before it did must not run either: anyone's
    // issue may steer a triage that applies only the labels the file names, nothing else.
    return { refused: "an automation with authors: any may only triage, with the labels it names" };
  }
  const repository = await repositoryOf(deps, job, context);
  return { repository, starter: issueStarter(job, context) };
}

/**
 * Why a job the intake let through is not wanted after all, or undefined when it is. A moved
 * base's job first asks whether its pull request conflicts at all: one that still merges ends
 * here, silently.
 */
export async function issueUnwanted(job: IssueJob, ctx: Admitting): Promise<Unwanted | undefined> {
  // Asked first: a pull request that still merges needs not even the file read.
  const { repository } = ctx.place;
  if (job.trigger === "base_push" && repository) {
    const context = readJobContext(job);
    const merge = await mergeUnwanted(ctx.deps, repository.octokit, job, context, ctx.run.signal);
    if (merge) return merge;
  }
  const why = await noLongerWanted(job, ctx.deps, ctx.place, await ctx.settings());
  return why ? { ignored: why } : undefined;
}

/** What the settings, and for a CI fix its pull request, say of the job now. */
function noLongerWanted(
  job: IssueJob,
  deps: OpenDeps,
  place: Place,
  settings: RepoSettings,
): Promise<string | undefined> | string | undefined {
  const context = readJobContext(job);
  if (!settings.enabled) return "vmpilot is disabled for this repository";
  if (job.trigger === "label" && context.label.toLowerCase() !== settings.label.toLowerCase()) {
    return `label ${context.label} is not the repository's trigger label ${settings.label}`;
  }
  const octokit = place.repository?.octokit;
  if (job.trigger !== "ci" || !octokit) return undefined;
  return ciFixUnwanted(deps.db.pool, octokit, job, context, settings);
}

/** The gate said no: the requester is told, once per conversation; an automation's issue is not its work. */
export async function issueRefused(
  job: IssueJob,
  { run, deps }: { run: Run; deps: OpenDeps },
  why: GateResult | { refused: string },
): Promise<"refused" | "ignored"> {
  const context = readJobContext(job);
  if ("refused" in why) {
    deps.logger.warn({ jobId: job.id, why: why.refused }, "refused");
    await updateJob(deps.db.pool, job.id, { status: "refused", error: why.refused });
    return "refused";
  }
  if (job.trigger === "automation") {
    // Nobody asked: an issue whose author may not start the automation is simply not its work.
    const author = context.automation?.author;
    deps.logger.info({ jobId: job.id, author }, "automation not for this author");
    await updateJob(deps.db.pool, job.id, { status: "ignored" });
    return "ignored";
  }
  deps.logger.info({ jobId: job.id, requester: job.requester, via: why.via }, "refused");
  // Someone without access could otherwise make the bot post once per comment they write.
  const notice = { conversationId: job.conversationId, login: job.requester, jobId: job.id };
  if (await claimRefusalNotice(deps.db.pool, notice)) {
    const octokit = await deps.auth(job.installationId);
    const body = refusalBody(job, why.policy);
    await answerOnce(deps, octokit, job, postedBefore(run, job), body);
  }
  await updateJob(deps.db.pool, job.id, { status: "refused" });
  return "refused";
}

/** An earlier attempt, or a notice that claimed the comment, may have posted it unrecorded. */
const postedBefore = (run: Pick<Run, "attempt">, job: IssueJob, notice?: Notice) =>
  run.attempt > 1 || (job.noticedAt !== null && !notice);

/**
 * The first visible answer of an admitted job: a control verb's answer, or 👀 and the job's
 * comment, which its attempt then keeps up to date.
 */
export async function acknowledgeIssue(
  job: IssueJob,
  { run, deps, place }: Admitted,
): Promise<Ended | { acknowledged: IssueJob }> {
  const octokit = place.repository?.octokit ?? (await deps.auth(job.installationId));
  let current = job;
  if (current.noticedAt && current.progressCommentId === null) {
    current = await noticeComment(deps, current, run.signal);
  }
  const outcome = await answer(deps, run, current, octokit);
  if (outcome !== "acknowledged") return { ended: outcome };
  return { acknowledged: (await getIssueJob(deps.db.pool, job.id)) ?? current };
}

/**
 * The notice of a job that arrived while its conversation's job ran: 👀 and a comment saying what it
 * waits behind, at once, instead of when the job starts. Nothing when the job needs no notice (see
 * claimNotice), or when the gate would refuse it (its own start says so). The job's own
 * acknowledgement later edits the same comment.
 */
export async function acknowledgeWaiting(
  deps: OpenDeps,
  jobId: number,
  signal: AbortSignal,
): Promise<void> {
  const notice = await claimNotice(deps.db.pool, jobId, [...CONTROL_VERBS]);
  if (!notice) return;
  const job = await getIssueJob(deps.db.pool, jobId);
  if (!job) return;
  const place = await issuePlace(job, deps);
  if ("refused" in place || !place.repository) return;
  const { repository } = place;
  const known = await triggerSettings(
    deps.db.pool,
    repository.octokit,
    repository,
    deps.defaults,
    false,
  );
  const run = { attempt: 1, signal };
  if (!(await noLongerWanted(job, deps, place, known.settings))) {
    const result = await gate(place.starter, repository, known.settings, deps.allowedUsers);
    if (result.allowed) await answer(deps, run, job, repository.octokit, notice);
  }
  await known.fresh;
}

/**
 * The job started in the instant after a notice claimed its first comment: the notice is posting
 * it now. Waits for the comment's id; a notice that died meanwhile leaves the comment to be found
 * by its marker (answerOnce).
 */
async function noticeComment(
  deps: OpenDeps,
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

async function answer(
  deps: OpenDeps,
  run: Pick<Run, "attempt" | "signal">,
  job: IssueJob,
  octokit: ProbotOctokit,
  notice?: Notice,
): Promise<"answered" | "acknowledged"> {
  const context = readJobContext(job);
  const item = itemOf(job, context);
  const say = (body: string) =>
    answerOnce(deps, octokit, job, postedBefore(run, job, notice), body);
  switch (job.command) {
    case "help":
      await say(helpBody(job, context));
      return "answered";
    case "status":
      await say(await status(deps, job));
      return "answered";
    case "stop":
      await say(stopBody(job, await stop(deps, job), deps.publicUrl));
      return "answered";
    default:
      if (notice) {
        if (!APP_TRIGGERS.has(job.trigger)) await addEyes(octokit, item, context.target);
        await say(queuedBody(job, notice.ahead, notice.waiting, deps.publicUrl));
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
      await say(progressBody(job, deps.publicUrl));
      await updateJob(deps.db.pool, job.id, { status: "acknowledged" });
      deps.logger.info({ jobId: job.id }, "acknowledged");
      return "acknowledged";
  }
}

const itemOf = (job: IssueJob, context: JobContext): Item => ({
  owner: context.owner,
  repo: context.name,
  number: job.number,
});

/**
 * Posts the job's comment, or edits it when an earlier attempt already posted it: known by the id
 * stored on the job, or — when the crash came between posting and storing — by its marker.
 */
async function answerOnce(
  deps: OpenDeps,
  octokit: ProbotOctokit,
  job: IssueJob,
  /** The comment may have been posted before without its id being stored. */
  posted: boolean,
  body: string,
): Promise<number> {
  const item = itemOf(job, readJobContext(job));
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

async function status(deps: OpenDeps, job: IssueJob): Promise<string> {
  const jobs = await listJobs(deps.db.pool, { conversationId: job.conversationId, limit: 50 });
  const work = jobs.filter(
    (other) => other.id !== job.id && !CONTROL_VERBS.has(other.command ?? ""),
  );
  // Newest first: show the running job if there is one, else the newest.
  const latest = work.find((other) => RUNNING.has(other.status)) ?? work[0];
  const queued = work.filter((other) => other.status === "queued" && other !== latest).reverse();
  return statusBody(job, latest, queued, deps.publicUrl);
}

async function stop(deps: OpenDeps, job: IssueJob): Promise<number[]> {
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
