// A scheduled automation's run: a job on no issue, in a conversation of its own. The agent works
// on a branch of its own from the default branch; changes go out as a draft pull request, and the
// run's final comment goes on it. A run that changes nothing leaves its answer on /jobs only.
import type { AgentResult } from "../agent/loop.ts";
import { runTitle } from "../agent/summary.ts";
import { isPermanent, PermanentError } from "../errors.ts";
import { editComment, postComment } from "../github/comments.ts";
import { renderFinal } from "../github/progress-comment.ts";
import { redact } from "../log/redact.ts";
import { PipelineStep } from "../store/job-event-kinds.ts";
import { getJob, type Job, type JobStatus, updateJob } from "../store/jobs.ts";
import { jobUrl } from "./acknowledge-messages.ts";
import { readScheduledContext, type ScheduledContext } from "./automations.ts";
import { testsOf } from "./pipeline/agent.ts";
import { runAgentTurn } from "./pipeline/agent-turn.ts";
import { type Delivered, deliver } from "./pipeline/deliver.ts";
import { loadConversation } from "./pipeline/history.ts";
import { openWorkspace } from "./pipeline/open-workspace.ts";
import { JobProgress } from "./pipeline/progress.ts";
import type { PipelineDeps, Run } from "./pipeline/run.ts";
import { jobSettings } from "./pipeline/settings.ts";
import type { JobWorkspace } from "./pipeline/workspace.ts";

type Outcome = Extract<JobStatus, "succeeded" | "failed" | "cancelled" | "ignored">;
type ScheduledJob = Job & { installationId: number; repositoryId: number };

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

export async function runScheduledAutomation(
  run: Run,
  deps: PipelineDeps,
): Promise<Outcome | "skipped"> {
  const db = deps.db.pool;
  const job = await getJob(db, run.jobId);
  if (!job || job.finishedAt) return "skipped";
  if (!isScheduledRun(job)) {
    throw new PermanentError(`job ${run.jobId} is not a scheduled automation's run`);
  }
  const context = readScheduledContext(job);
  const url = jobUrl(deps.publicUrl, job.id);
  const startedAt = Date.now();
  await updateJob(db, job.id, { status: "running" });
  const progress = new JobProgress({
    db,
    jobId: job.id,
    view: { jobId: job.id, jobUrl: url, current: "workspace", startedAt, costUsd: job.costUsd },
    baseCostUsd: job.costUsd,
    logger: deps.logger,
  });
  const end = async (status: Outcome, error?: string): Promise<Outcome> => {
    progress.stop();
    await progress.flush();
    await updateJob(db, job.id, {
      status,
      ...(error !== undefined && { error: redact(error).slice(0, 2000) }),
    });
    return status;
  };
  let ws: JobWorkspace | undefined;
  try {
    const octokit = await deps.auth(job.installationId);
    const settings = await jobSettings(db, octokit, job, {
      jobUrl: url,
      command: "vmpilot",
      owner: context.owner,
      repo: context.name,
      defaults: deps.defaults,
    });
    if (!settings.ok) return await end("failed", settings.error);
    if (!settings.settings.enabled) return await end("ignored");
    const branch = runBranch(context, job.id);
    await updateJob(db, job.id, { branch });
    progress.step("workspace", `scheduled run of ${context.automation.name}`);
    ws = await openWorkspace(deps, run, {
      job,
      settings: settings.settings,
      cloneUrl: context.cloneUrl,
      branch,
      defaultBranch: context.defaultBranch,
      setup: true,
      progress,
    });
    progress.step("agent", `workspace ready on ${branch}`);
    const history = await loadConversation(db, job.conversationId, job.id);
    const result = await runAgentTurn(deps, run, settings, {
      conversationId: job.conversationId,
      jobId: job.id,
      mode: "fix",
      workspace: ws.workspace,
      startSha: ws.checkout.baseSha,
      history,
      turn: () => instruction(context, job.instruction),
      progress,
    });
    if (result.reason === "cancelled" || run.signal.aborted) return await end("cancelled");
    if (result.reason === "error") {
      return await end("failed", result.error?.message ?? "the agent failed");
    }
    progress.step("pushed");
    const author = deps.commitAuthor ?? {
      name: `${context.appSlug}[bot]`,
      email: `${context.appSlug}[bot]@users.noreply.github.com`,
    };
    const costUsd = job.costUsd + result.usage.costUsd;
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
      costUsd,
      priceKnown: result.priceKnown,
      startedAt,
      signal: run.signal,
    });
    const headline = await report(deps, job, context, {
      delivered,
      result,
      url,
      startedAt,
      costUsd,
    });
    progress.log(PipelineStep, { step: "done", message: headline });
    return await end("succeeded");
  } catch (error) {
    if (run.signal.aborted) return end("cancelled");
    deps.logger.warn({ err: error, jobId: job.id, attempt: run.attempt }, "scheduled run failed");
    if (!isPermanent(error) && run.attempt < run.maxAttempts) {
      progress.stop();
      throw error;
    }
    return end("failed", error instanceof Error ? error.message : String(error));
  } finally {
    await ws?.dispose();
  }
}

/**
 * The run's final comment, on the pull request it opened or updated (its progress comment lives
 * there, there being no issue); resolves to the outcome's headline, for the session log.
 */
async function report(
  deps: PipelineDeps,
  job: ScheduledJob,
  context: ScheduledContext,
  run: {
    delivered: Delivered;
    result: AgentResult;
    url: string;
    startedAt: number;
    costUsd: number;
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
    usage: { ...result.usage, costUsd: run.costUsd, priceKnown: result.priceKnown },
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
