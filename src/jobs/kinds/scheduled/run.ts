// A scheduled automation's run: a job on no issue, in a conversation of its own. The agent works
// on a branch of its own from the default branch; changes go out as a draft pull request, and the
// run's final comment goes on it. A run that changes nothing leaves its answer on /jobs only.
import { runTitle } from "../../../agent/summary.ts";
import { editComment, postComment } from "../../../github/comments.ts";
import { type RunCost, renderFinal } from "../../../github/progress-comment.ts";
import { redact } from "../../../log/redact.ts";
import { PipelineStep } from "../../../store/job-event-kinds.ts";
import { type Job, type JobStatus, updateJob } from "../../../store/jobs.ts";
import { readScheduledContext, type ScheduledContext } from "../../automations/schedules.ts";
import { type JobRun, runCost, testsOf } from "../../run/agent.ts";
import { type Delivered, deliver } from "../../run/deliver.ts";
import type { JobDeps, OpenDeps } from "../../run/deps.ts";
import { loadConversation } from "../../run/history.ts";
import { type Attempt, type Place, repositoryOf, type Working } from "../../run/kind.ts";
import { JobProgress, jobUrl } from "../../run/progress.ts";

type ScheduledOutcome = Extract<JobStatus, "succeeded" | "failed" | "cancelled" | "ignored">;
export type ScheduledJob = Job & { installationId: number; repositoryId: number };

/** Whether the job is a scheduled automation's run (an automation's job on no item). */
export function isScheduledRun(job: Job): job is ScheduledJob {
  return (
    job.trigger === "automation" &&
    job.number === null &&
    job.installationId !== null &&
    job.repositoryId !== null
  );
}

/** `vmpilot/<automation>-<job>`: a branch of each run's own, whose pull request is the run's. */
function runBranch(context: ScheduledContext, jobId: number): string {
  return `vmpilot/${context.automation.name}-${jobId}`;
}

function instruction(context: ScheduledContext, prompt: string): string {
  const name = context.automation.name.replaceAll("`", "'");
  const quoted = prompt
    .trim()
    .split("\n")
    .map((line) => `> ${line}`)
    .join("\n");
  return `The repository's scheduled automation \`${name}\` asks (this is your instruction):\n\n${quoted}\n\nThis run is on a schedule: no one is waiting on an issue. You are on a new branch from \`${context.defaultBranch}\`. If there is nothing to change, change nothing and say why; changes you leave in the workspace go out as a draft pull request.`;
}

/** A scheduled run's attempt: its job row and log, with no item to comment on until its PR. */
export interface ScheduledAttempt extends Attempt {
  end(status: ScheduledOutcome, error?: string): Promise<ScheduledOutcome>;
}

export async function scheduledPlace(job: ScheduledJob, deps: OpenDeps): Promise<Place> {
  const context = readScheduledContext(job);
  const repository = await repositoryOf(deps, job, context);
  return { repository, starter: { app: `the scheduled automation ${context.automation.name}` } };
}

export function openScheduled(job: ScheduledJob, deps: OpenDeps): ScheduledAttempt {
  const url = jobUrl(deps.publicUrl, job.id);
  const view = { jobId: job.id, jobUrl: url, current: "workspace" as const, costUsd: job.costUsd };
  const progress = new JobProgress({
    db: deps.db.pool,
    jobId: job.id,
    view: { ...view, startedAt: Date.now() },
    baseCostUsd: job.costUsd,
    logger: deps.logger,
  });
  const end = async (status: ScheduledOutcome, error?: string) => {
    progress.stop();
    await progress.flush();
    await updateJob(deps.db.pool, job.id, {
      status,
      ...(error !== undefined && { error: redact(error).slice(0, 2000) }),
    });
    return status;
  };
  return {
    progress,
    end,
    limited: (refusal) =>
      "disabled" in refusal
        ? end("ignored")
        : end(
            "failed",
            "limit" in refusal
              ? refusal.limit
              : `invalid ${refusal.invalid.source}: ${refusal.invalid.message}`,
          ),
    cancelled: () => end("cancelled"),
    failed: (reason) => end("failed", reason),
    retrying: async () => undefined,
  };
}

export async function runScheduled(
  job: ScheduledJob,
  attempt: ScheduledAttempt,
  ctx: Working,
): Promise<ScheduledOutcome> {
  const { run, deps } = ctx;
  const { progress } = attempt;
  const context = readScheduledContext(job);
  const url = progress.view.jobUrl;
  const startedAt = progress.view.startedAt;
  const branch = runBranch(context, job.id);
  await updateJob(deps.db.pool, job.id, { branch });
  progress.step("workspace", `scheduled run of ${context.automation.name}`);
  const ws = await ctx.workspace({
    cloneUrl: context.cloneUrl,
    installationId: job.installationId,
    branch,
    baseBranch: context.defaultBranch,
    setup: true,
  });
  progress.step("agent", `workspace ready on ${branch}`);
  const result = await ctx.agent({
    conversationId: job.conversationId,
    jobId: job.id,
    mode: "fix",
    ws,
    history: await loadConversation(deps.db.pool, job.conversationId, job.id),
    message: () => instruction(context, job.instruction),
  });
  if (result.reason === "cancelled" || run.signal.aborted) return attempt.end("cancelled");
  if (result.reason === "error") {
    return attempt.end("failed", result.error?.message ?? "the agent failed");
  }
  progress.step("pushed");
  const author = deps.commitAuthor ?? {
    name: `${context.appSlug}[bot]`,
    email: `${context.appSlug}[bot]@users.noreply.github.com`,
  };
  // The job's cost so far, a kept run's included once (an attempt that delivers it spends nothing).
  const cost = runCost(ctx.granted.settings, result, progress.view.costUsd);
  const octokit = await deps.auth(job.installationId);
  const delivered = await deliver({
    octokit,
    owner: context.owner,
    repo: context.name,
    ws,
    token: await deps.installationToken(job.installationId),
    defaultBranch: context.defaultBranch,
    served: false,
    title: runTitle(result.finalText, context.automation.name),
    summary: `Scheduled run of the automation \`${context.automation.name}\`.\n\n${result.finalText}`,
    tests: testsOf(result),
    author,
    requester: job.requester,
    knownPr: job.prNumber,
    jobUrl: url,
    cost,
    startedAt,
    signal: run.signal,
  });
  const headline = await report(deps, job, context, {
    delivered,
    result,
    url,
    startedAt,
    cost,
  });
  progress.log(PipelineStep, { step: "done", message: headline });
  return attempt.end("succeeded");
}

/**
 * The run's final comment, on the pull request it opened or updated (its progress comment lives
 * there, there being no issue); resolves to the outcome's headline, for the job log.
 */
async function report(
  deps: JobDeps,
  job: ScheduledJob,
  context: ScheduledContext,
  run: {
    delivered: Delivered;
    result: JobRun;
    url: string;
    startedAt: number;
    cost: RunCost | null;
  },
): Promise<string> {
  const { delivered, result } = run;
  const pr = delivered.pullRequest;
  const headline = pr
    ? `${pr.created ? "Opened draft pull request" : "Updated pull request"} #${pr.number}`
    : "Done: no changes to the code, so no pull request";
  if (!pr) return headline;
  await updateJob(deps.db.pool, job.id, { prNumber: pr.number });
  const body = renderFinal({
    jobId: job.id,
    jobUrl: run.url,
    headline: `${headline} — scheduled run of \`${context.automation.name}\``,
    ok: result.reason === "end_turn",
    pullRequest: { number: pr.number, url: pr.url },
    summary: result.finalText,
    tests: testsOf(result),
    notes: result.detail ? [result.detail] : [],
    cost: run.cost,
    startedAt: run.startedAt,
    finishedAt: Date.now(),
  });
  const octokit = await deps.auth(job.installationId);
  const item = { owner: context.owner, repo: context.name, number: pr.number };
  // A retry of a run that got as far as the comment edits it.
  if (job.progressCommentId !== null) {
    await editComment(octokit, item, job.progressCommentId, body);
    return headline;
  }
  const commentId = await postComment(octokit, item, body);
  await updateJob(deps.db.pool, job.id, { progressCommentId: commentId });
  return headline;
}
