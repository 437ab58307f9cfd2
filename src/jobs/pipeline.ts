// The job after its acknowledgement: workspace, agent, push, pull request, and the progress
// comment kept up to date all along. Safe to run again after a crash: it edits the job's one
// comment, continues the stored chat, and finds the chat's pull request instead of opening another.
import type Anthropic from "@anthropic-ai/sdk";
import type { ProbotOctokit } from "probot";
import { type AgentResult, runAgent } from "../agent/loop.ts";
import { type ClientOptions, createClient } from "../agent/model-call.ts";
import {
  DEFAULT_ENABLED_PLUGINS,
  type Plugin,
  PluginError,
  selectPlugins,
} from "../agent/plugins.ts";
import { buildSystemPrompt } from "../agent/prompt.ts";
import { runTitle } from "../agent/summary.ts";
import { editComment, type Item, postComment } from "../github/comments.ts";
import { gatherIssueContext } from "../github/issue-context.ts";
import { readJobContext } from "../github/job-context.ts";
import {
  type FinalView,
  type ProgressStep,
  renderFailure,
  renderFinal,
  renderNotice,
  type TestsSummary,
  ThrottledComment,
} from "../github/progress-comment.ts";
import {
  listUnresolvedThreads,
  parseThreadReplies,
  replyToThreads,
} from "../github/review-threads.ts";
import { getChat, linkChatToPr } from "../store/chats.ts";
import type { Database } from "../store/database.ts";
import { getJob, type JobStatus, updateJob } from "../store/jobs.ts";
import type { Logger } from "../store/logger.ts";
import { appendMessage } from "../store/messages.ts";
import type { CommitIdentity } from "../workspace/commit.ts";
import type { ProviderName, WorkspaceLogger } from "../workspace/index.ts";
import { PushRefused } from "../workspace/publish.ts";
import { jobUrl } from "./acknowledge-messages.ts";
import { type Delivered, deliver } from "./pipeline/deliver.ts";
import { loadChat } from "./pipeline/history.ts";
import { JobProgress } from "./pipeline/progress.ts";
import {
  instructionFor,
  type Mode,
  RESUME_INSTRUCTION,
  resolveRequest,
} from "./pipeline/request.ts";
import { postReview } from "./pipeline/review.ts";
import { jobSettings } from "./pipeline/settings.ts";
import { chooseTarget, pushes } from "./pipeline/target.ts";
import { type JobWorkspace, openJobWorkspace, SetupFailed } from "./pipeline/workspace.ts";
import type { RunningJob } from "./queue.ts";

export interface PipelineDeps {
  db: Database;
  /** An installation-authenticated client (Probot's `app.auth(installationId)`). */
  auth(installationId: number): Promise<ProbotOctokit>;
  /** A fresh installation token for git; it never leaves the worker's git commands. */
  installationToken(installationId: number): Promise<string>;
  publicUrl: string;
  /** Mirrors and workspaces live here. */
  dataDir: string;
  logger: Logger;
  /** The plugins discovered at startup. */
  plugins: readonly Plugin[];
  /** The Anthropic client, or options to make one (API key, base URL, retries). */
  anthropic?: Anthropic | ClientOptions;
  /** Default "sandbox". */
  provider?: ProviderName;
  /** Default `<app-slug>[bot]` with its noreply address. */
  commitAuthor?: CommitIdentity;
  /** Least time between two progress comment edits; default 5 s. */
  progressIntervalMs?: number;
  /** Wall-time limit of one agent run; default 45 minutes. */
  maxWallTimeMs?: number;
  streamRetryDelayMs?: number;
}

export type PipelineOutcome = Extract<JobStatus, "succeeded" | "failed" | "refused" | "cancelled">;

const STEPS: Record<Mode, ProgressStep[]> = {
  fix: ["acknowledged", "workspace", "agent", "tests", "pushed", "pull_request"],
  threads: ["acknowledged", "workspace", "agent", "tests", "pushed"],
  plan: ["acknowledged", "workspace", "agent"],
  review: ["acknowledged", "workspace", "agent"],
};

const DEFAULT_WALL_TIME_MS = 45 * 60_000;

/** Errors that another attempt would only repeat. */
function isPermanent(error: unknown): boolean {
  return (
    error instanceof SetupFailed || error instanceof PushRefused || error instanceof PluginError
  );
}

function workspaceLogger(logger: Logger): WorkspaceLogger {
  return {
    warn: (obj: object, msg?: string) => logger.warn(obj, msg),
    info: (obj: object, msg?: string) => logger.info(obj, msg),
    debug: (obj: object, msg?: string) => logger.debug(obj, msg),
  } as unknown as WorkspaceLogger;
}

function pluginsFor(mode: Mode, enabled: readonly string[], available: readonly Plugin[]) {
  let names = enabled.length > 0 ? [...enabled] : [...DEFAULT_ENABLED_PLUGINS];
  // Read-only runs have no tests to report; reviews follow the code_review guidance.
  if (mode === "plan" || mode === "review") names = names.filter((n) => n !== "testing");
  if (mode === "review" && !names.includes("code_review")) names.push("code_review");
  return selectPlugins(available, names);
}

function testsOf(result: AgentResult): TestsSummary | undefined {
  const tests = result.reports.tests as TestsSummary | undefined;
  return tests?.outcome ? tests : undefined;
}

/**
 * Runs an acknowledged job to its end and returns the status it set. Throws only to ask the queue
 * for another attempt (GitHub or git unreachable), and never on the last attempt.
 */
export async function runPipeline(
  run: Pick<RunningJob, "jobId" | "attempt" | "maxAttempts" | "signal">,
  deps: PipelineDeps,
): Promise<PipelineOutcome | "skipped"> {
  const db = deps.db.pool;
  const job = await getJob(db, run.jobId);
  if (!job || job.finishedAt) return "skipped";
  const context = readJobContext(job.context);
  const item: Item = { owner: context.owner, repo: context.name, number: job.number };
  const octokit = await deps.auth(job.installationId);
  const url = jobUrl(deps.publicUrl, job.id);
  const startedAt = Date.now();
  const commentId =
    job.progressCommentId ??
    (await postComment(octokit, item, `⏳ vmpilot is starting — [job #${job.id}](${url})`));
  if (job.progressCommentId === null) await updateJob(db, job.id, { progressCommentId: commentId });
  const comment = new ThrottledComment({
    edit: (body) => editComment(octokit, item, commentId, body),
    intervalMs: deps.progressIntervalMs,
    onError: (error) =>
      deps.logger.warn({ err: error, jobId: job.id }, "progress comment edit failed"),
  });
  const progress = new JobProgress({
    db,
    jobId: job.id,
    comment,
    view: { jobId: job.id, jobUrl: url, current: "workspace", startedAt, costUsd: job.costUsd },
    baseCostUsd: job.costUsd,
    logger: deps.logger,
  });
  const view = { jobId: job.id, jobUrl: url };
  const end = async (status: PipelineOutcome, body: string, error?: string) => {
    await progress.flush();
    try {
      await comment.finish(body);
    } catch (failure) {
      // The job's outcome stands; a comment GitHub would not take is only logged.
      deps.logger.error({ err: failure, jobId: job.id }, "final comment edit failed");
    }
    await updateJob(db, job.id, { status, ...(error !== undefined && { error }) });
    return status;
  };
  const cancelled = () =>
    end(
      "cancelled",
      renderNotice({
        ...view,
        icon: "⏹",
        headline: "Stopped",
        text: "The job was cancelled; nothing was pushed.",
      }),
    );

  await updateJob(db, job.id, { status: "running" });
  let ws: JobWorkspace | undefined;
  try {
    const request = await resolveRequest(db, job);
    if ("nothing" in request) {
      return end(
        "succeeded",
        renderNotice({ ...view, icon: "ℹ️", headline: "Nothing to do", text: request.nothing }),
      );
    }
    progress.view.steps = STEPS[request.mode];
    progress.step("workspace", `${request.mode} requested by @${job.requester}`);

    const settings = await jobSettings(db, octokit, job, {
      jobUrl: url,
      command: context.command,
      owner: context.owner,
      repo: context.name,
    });
    if (!settings.ok) {
      const body =
        settings.body ??
        renderNotice({ ...view, icon: "⏹", headline: "Limit reached", text: settings.error });
      return end("failed", body, settings.error);
    }

    const chat = await getChat(db, job.chatId);
    if (!chat) throw new Error(`chat ${job.chatId} of job ${job.id} does not exist`);
    const history = await loadChat(db, chat.id, job.id);
    const resuming = run.attempt > 1 && history.fromThisJob > 0;
    const itemSeen = history.messages.length > 0;
    const issue = await gatherIssueContext(octokit, {
      owner: context.owner,
      repo: context.name,
      number: job.number,
      kind: context.itemKind,
      excludeCommentIds: job.triggerCommentId === null ? [] : [job.triggerCommentId],
      botLogin: `${context.appSlug}[bot]`,
      since: itemSeen ? request.previous?.createdAt : undefined,
      withDiff: context.itemKind === "pull_request" && (!itemSeen || request.mode === "review"),
    });
    const target = chooseTarget({
      chat,
      job,
      mode: request.mode,
      issue,
      title: context.title,
      defaultBranch: context.defaultBranch,
    });
    if (!target.ok) {
      return end(
        "refused",
        renderNotice({ ...view, icon: "🚫", headline: target.headline, text: target.text }),
      );
    }
    const threads =
      request.mode === "threads" && target.prNumber !== null
        ? await listUnresolvedThreads(octokit, { ...item, number: target.prNumber })
        : [];
    if (request.mode === "threads" && threads.length === 0 && !request.request.trim()) {
      return end(
        "succeeded",
        renderNotice({
          ...view,
          icon: "ℹ️",
          headline: "Nothing to do",
          text: "There are no unresolved review threads.",
        }),
      );
    }
    if (pushes(request.mode)) await updateJob(db, job.id, { branch: target.branch });

    const token = await deps.installationToken(job.installationId);
    ws = await openJobWorkspace({
      dataDir: deps.dataDir,
      provider: deps.provider ?? "sandbox",
      jobId: job.id,
      attempt: run.attempt,
      cloneUrl: context.cloneUrl,
      auth: { token },
      branch: target.branch,
      defaultBranch: context.defaultBranch,
      allowHosts: settings.settings.network.allow,
      setup: settings.settings.setup,
      signal: run.signal,
      logger: workspaceLogger(deps.logger),
      onSetupStep: (step) =>
        progress.log("setup", {
          message: `\`${step.command}\` exited ${step.result.exitCode}`,
          output: `${step.result.fullStdout}\n${step.result.fullStderr}`.slice(-20_000),
        }),
    });
    progress.step("agent", `workspace ready on ${target.branch}`);

    const plugins = pluginsFor(request.mode, settings.settings.plugins, deps.plugins);
    const instruction = resuming
      ? RESUME_INSTRUCTION
      : instructionFor({
          request,
          requester: job.requester,
          number: job.number,
          kind: context.itemKind,
          context: issue,
          itemSeen,
          threads,
          retry: job.command === "retry",
        });
    const client =
      deps.anthropic && "messages" in deps.anthropic
        ? deps.anthropic
        : createClient(deps.anthropic);
    const readOnly = request.mode === "plan" || request.mode === "review";
    const result = await runAgent({
      workspace: ws.workspace,
      messages: history.messages,
      instruction,
      system: await buildSystemPrompt({ workspace: ws.workspace, plugins }),
      model: settings.settings.model,
      limits: {
        maxSteps: settings.settings.maxSteps,
        maxCostUsd: settings.budgetUsd,
        maxWallTimeMs: deps.maxWallTimeMs ?? DEFAULT_WALL_TIME_MS,
      },
      plugins,
      ...(readOnly && { tools: ["bash"] }),
      onEvent: (event) => {
        if (event.type === "tool_call" && event.name === "report_tests") progress.step("tests");
        progress.onEvent(event);
      },
      onMessage: async (message) => {
        await appendMessage(db, {
          chatId: chat.id,
          role: message.role,
          content: message.content,
          jobId: job.id,
        });
      },
      signal: run.signal,
      client,
      streamRetryDelayMs: deps.streamRetryDelayMs,
    });
    if (result.reason === "cancelled" || run.signal.aborted) return cancelled();
    const finalView = {
      ...view,
      startedAt,
      usage: { ...result.usage, costUsd: job.costUsd + result.usage.costUsd },
      tests: testsOf(result),
      notes: result.detail ? [result.detail] : [],
    };
    if (result.reason === "error") {
      const reason = result.error?.message ?? "the agent failed";
      return end(
        "failed",
        renderFailure({
          ...view,
          reason,
          command: context.command,
          startedAt,
          finishedAt: Date.now(),
          costUsd: finalView.usage.costUsd,
        }),
        reason,
      );
    }
    const limited = result.reason !== "end_turn";

    if (request.mode === "plan") {
      const body = renderFinal({
        ...finalView,
        ok: !limited,
        headline: "Plan ready",
        summary: result.finalText,
        notes: [
          ...finalView.notes,
          `To carry it out, comment \`/${context.command} fix\` or mention @${context.appSlug} approve.`,
        ],
        finishedAt: Date.now(),
      });
      return end("succeeded", body);
    }
    if (request.mode === "review") {
      const prNumber = target.prNumber ?? job.number;
      const posted = await postReview(octokit, {
        ...item,
        number: prNumber,
        headSha: issue.pullRequest?.headSha ?? "",
        text: result.finalText,
      });
      const body = renderFinal({
        ...finalView,
        ok: !limited,
        headline: `Posted a review with ${posted.inline} inline comment${posted.inline === 1 ? "" : "s"}`,
        pullRequest: { number: prNumber, url: posted.url },
        finishedAt: Date.now(),
      });
      return end("succeeded", body);
    }

    progress.step("pushed");
    const title = runTitle(result.finalText, request.request || context.title);
    const delivered = await deliver({
      octokit,
      owner: context.owner,
      repo: context.name,
      ws,
      token,
      defaultBranch: context.defaultBranch,
      served: target.served,
      title,
      summary: result.finalText,
      tests: finalView.tests,
      author: deps.commitAuthor ?? {
        name: `${context.appSlug}[bot]`,
        email: `${context.appSlug}[bot]@users.noreply.github.com`,
      },
      requester: job.requester,
      fixes: chat.kind === "issue" ? chat.number : undefined,
      knownPr: chat.prNumber ?? job.prNumber,
      jobUrl: url,
      costUsd: finalView.usage.costUsd,
      startedAt,
      signal: run.signal,
    });
    const pr = delivered.pullRequest;
    if (pr) {
      progress.step("pull_request");
      await linkChatToPr(db, chat.id, pr.number, target.branch);
      await updateJob(db, job.id, { prNumber: pr.number });
    }
    if (request.mode === "threads" && target.prNumber !== null) {
      const fallback = delivered.pushed
        ? `Addressed in ${delivered.sha.slice(0, 10)}; see the [session log](${url}).`
        : `No code change for this one; see the [session log](${url}).`;
      await replyToThreads(
        octokit,
        { ...item, number: target.prNumber },
        threads,
        parseThreadReplies(result.finalText),
        fallback,
      );
    }
    const served = target.served ? { number: job.number, url: context.htmlUrl } : undefined;
    return end(
      "succeeded",
      renderFinal({
        ...finalView,
        ...outcome(delivered, !limited, served),
        summary: result.finalText,
        finishedAt: Date.now(),
      }),
    );
  } catch (error) {
    if (run.signal.aborted) return cancelled();
    const reason = error instanceof Error ? error.message : String(error);
    deps.logger.warn({ err: error, jobId: job.id, attempt: run.attempt }, "pipeline failed");
    if (!isPermanent(error) && run.attempt < run.maxAttempts) {
      await progress.flush();
      await comment
        .finish(
          renderNotice({
            ...view,
            icon: "🔁",
            headline: "Retrying",
            text: `Attempt ${run.attempt} failed; trying again shortly.`,
          }),
        )
        .catch(() => undefined);
      throw error;
    }
    return end(
      "failed",
      renderFailure({
        ...view,
        reason,
        command: context.command,
        startedAt,
        finishedAt: Date.now(),
        costUsd: progress.view.costUsd,
      }),
      reason.slice(0, 2000),
    );
  } finally {
    await ws?.dispose();
  }
}

/** The final comment's headline and link after a push (or none). */
function outcome(
  delivered: Delivered,
  ok: boolean,
  served: { number: number; url: string } | undefined,
): Pick<FinalView, "ok" | "headline" | "pullRequest"> {
  if (!delivered.pushed)
    return { ok, headline: "Done: no changes to the code, so no pull request" };
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
