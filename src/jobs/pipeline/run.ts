// The job after its acknowledgement: settings, workspace, agent, push, pull request, and the
// progress comment kept up to date all along. Safe to run again after a crash: it edits the job's
// one comment, continues the stored chat, and finds the chat's pull request instead of opening
// another.
import type Anthropic from "@anthropic-ai/sdk";
import type { ProbotOctokit } from "probot";
import type { ClientOptions } from "../../agent/model-call.ts";
import type { Plugin } from "../../agent/plugins.ts";
import type { OpenAiProviderOptions } from "../../agent/providers/openai.ts";
import type { ProviderTable } from "../../config/providers.ts";
import type { RepoSettings } from "../../config/repo-config.ts";
import { isPermanent } from "../../errors.ts";
import type { ImageFetchOptions } from "../../github/images.ts";
import { gatherIssueContext, type IssueContext } from "../../github/issue-context.ts";
import type { ProgressStep } from "../../github/progress-comment.ts";
import type { RepoConfigLoad } from "../../github/repo-config-loader.ts";
import { listUnresolvedThreads } from "../../github/review-threads.ts";
import type { Logger } from "../../log/logger.ts";
import { getChat } from "../../store/chats.ts";
import type { Database } from "../../store/database.ts";
import { getIssueJob, updateJob } from "../../store/jobs.ts";
import type { CommitIdentity } from "../../workspace/git/commit.ts";
import { SPARE_REPOSITORIES } from "../../workspace/git/spares.ts";
import type { ProviderName, SandboxLimits } from "../../workspace/index.ts";
import { providerFor, type VmProviderName } from "../../workspace/isolation.ts";
import type { VmPool } from "../../workspace/vm/pool.ts";
import { runJobAgent } from "./agent.ts";
import { afterPush, ciFailures } from "./ci.ts";
import { loadChat } from "./history.ts";
import { NO_IMAGES, readJobImages } from "./images.ts";
import { startMerge } from "./merge.ts";
import { fixBody, mergeBody, planBody, reviewBody } from "./outcome.ts";
import {
  instructionFor,
  type Mode,
  RESUME_INSTRUCTION,
  resolveRequest,
  withImages,
} from "./request.ts";
import { openSession, type PipelineOutcome, type Session } from "./session.ts";
import { jobSettings } from "./settings.ts";
import { chooseTarget, pushes } from "./target.ts";
import { labelPlugin, repositoryLabels, triageEnd } from "./triage.ts";
import { type JobWorkspace, openJobWorkspace } from "./workspace.ts";
import type { Queue, RunningJob } from "../queue.ts";

export type { PipelineOutcome } from "./session.ts";

export interface PipelineDeps {
  db: Database;
  /** An installation-authenticated client (Probot's `app.auth(installationId)`). */
  auth(installationId: number): Promise<ProbotOctokit>;
  /** A fresh installation token for git; it never leaves the worker's own git commands. */
  installationToken(installationId: number): Promise<string>;
  publicUrl: string;
  /** Mirrors and workspaces live here. */
  dataDir: string;
  logger: Logger;
  /** The plugins discovered at startup. */
  plugins: readonly Plugin[];
  /** The Anthropic client, or options to make one (API key, base URL, retries). */
  anthropic?: Anthropic | ClientOptions;
  /** OpenAI-compatible model servers; default none. */
  providers?: ProviderTable;
  /** Retries and timeout for those. */
  compatible?: OpenAiProviderOptions;
  /** Default "sandbox". */
  provider?: ProviderName;
  /** WORKSPACE_VM_PROVIDER: for repositories that ask for `isolation: vm`. */
  vmProvider?: VmProviderName;
  /** WORKSPACE_WARM_POOL: started VMs this worker keeps ready. */
  vmPool?: VmPool;
  /** NETWORK_ALLOW_PRIVATE: loopback/private ranges the sandbox proxy may reach; default none. */
  allowPrivate?: readonly string[];
  /** SANDBOX_MAX_*: what each job's sandbox may use; default DEFAULT_LIMITS. */
  sandboxLimits?: SandboxLimits;
  /** SPARE_CHECKOUTS; default 20. */
  spareCheckouts?: number;
  /** Default `<app-slug>[bot]` with its noreply address. */
  commitAuthor?: CommitIdentity;
  /** Least time between two progress comment edits; default 5 s. */
  progressIntervalMs?: number;
  /** Settings before the settings page and the repository file; default the built-in ones. */
  defaults?: RepoSettings;
  /** Wall-time limit of one agent run, instead of the repository's `timeoutMinutes` (tests). */
  maxWallTimeMs?: number;
  streamRetryDelayMs?: number;
  /** Where a push that passed its tests queues its ready-for-review check; none without it. */
  readyQueue?: Pick<Queue, "enqueueReady">;
  /** How attached images are fetched; default https to public addresses (tests use loopback). */
  imageFetch?: ImageFetchOptions;
}

/**
 * What every agent run of a worker takes from its deps and its granted settings: plugins, model
 * clients, logger, limits.
 */
export function agentRunDeps(
  deps: PipelineDeps,
  granted: { settings: RepoSettings; budgetUsd: number },
) {
  return {
    settings: granted.settings,
    budgetUsd: granted.budgetUsd,
    maxWallTimeMs: deps.maxWallTimeMs ?? granted.settings.timeoutMinutes * 60_000,
    available: deps.plugins,
    anthropic: deps.anthropic,
    providers: deps.providers ?? new Map(),
    compatible: deps.compatible,
    streamRetryDelayMs: deps.streamRetryDelayMs,
    logger: deps.logger,
  };
}

const STEPS: Record<Mode, ProgressStep[]> = {
  fix: ["acknowledged", "workspace", "agent", "tests", "pushed", "pull_request"],
  threads: ["acknowledged", "workspace", "agent", "tests", "pushed"],
  plan: ["acknowledged", "workspace", "agent"],
  review: ["acknowledged", "workspace", "agent"],
  ci: ["acknowledged", "workspace", "agent", "tests", "pushed"],
  merge: ["acknowledged", "workspace", "agent", "tests", "pushed"],
  triage: ["acknowledged", "workspace", "agent"],
};

type Run = Pick<RunningJob, "jobId" | "attempt" | "maxAttempts" | "signal">;

/**
 * Runs an acknowledged job to its end and returns the status it set. Throws only to ask the queue
 * for another attempt (GitHub or git unreachable), never on the last attempt.
 */
export async function runPipeline(
  run: Run,
  deps: PipelineDeps,
  /** The repository's config as the acknowledgement read it; read again when not given. */
  repoConfig?: RepoConfigLoad,
): Promise<PipelineOutcome | "skipped"> {
  const job = await getIssueJob(deps.db.pool, run.jobId);
  if (!job || job.finishedAt) return "skipped";
  const session = await openSession(deps, job);
  await updateJob(deps.db.pool, job.id, { status: "running" });
  let ws: JobWorkspace | undefined;
  try {
    return await work(run, deps, session, repoConfig, (opened) => {
      ws = opened;
    });
  } catch (error) {
    if (run.signal.aborted) return cancelled(session);
    deps.logger.warn({ err: error, jobId: job.id, attempt: run.attempt }, "pipeline failed");
    if (!isPermanent(error) && run.attempt < run.maxAttempts) {
      await session.retrying(run.attempt);
      throw error;
    }
    return session.fail(error instanceof Error ? error.message : String(error));
  } finally {
    await ws?.dispose();
  }
}

function mergeItem(number: number, title: string): IssueContext {
  return { kind: "pull_request", number, title, body: "", author: "", comments: [] };
}

function cancelled(session: Session): Promise<PipelineOutcome> {
  return session.notice("cancelled", "⏹", "Stopped", "The job was cancelled before it finished.");
}

async function work(
  run: Run,
  deps: PipelineDeps,
  session: Session,
  repoConfig: RepoConfigLoad | undefined,
  opened: (ws: JobWorkspace) => void,
): Promise<PipelineOutcome> {
  const db = deps.db.pool;
  const { job, context, octokit, progress } = session;
  const request = await resolveRequest(db, job);
  if ("nothing" in request)
    return session.notice("succeeded", "ℹ️", "Nothing to do", request.nothing);
  progress.view.steps = STEPS[request.mode];
  progress.step("workspace", `${request.mode} requested by @${job.requester}`);

  const settings = await jobSettings(db, octokit, job, {
    jobUrl: session.url,
    command: context.command,
    owner: context.owner,
    repo: context.name,
    defaults: deps.defaults,
    repoConfig,
  });
  if (!settings.ok) {
    if (settings.body) return session.end("failed", settings.body, settings.error);
    return session.notice("failed", "⏹", "Limit reached", settings.error);
  }

  if (!settings.settings.enabled) {
    return session.notice(
      "refused",
      "⏸",
      "vmpilot is turned off here",
      "This repository's settings say `enabled: false`.",
    );
  }

  const chat = await getChat(db, job.chatId);
  if (!chat) throw new Error(`chat ${job.chatId} of job ${job.id} does not exist`);
  const history = await loadChat(db, chat.id, job.id);
  const itemSeen = history.messages.length > 0;
  // A merge of the base needs nothing of the pull request but its branch, which the chat knows;
  // nor does a CI fix, which is told what failed (people's new comments start jobs of their own).
  const issue =
    request.mode === "merge" || request.mode === "ci"
      ? mergeItem(job.number, context.title)
      : await gatherIssueContext(octokit, {
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
  if (!target.ok) return session.notice("refused", "🚫", target.headline, target.text);
  const threads =
    request.mode === "threads" && target.prNumber !== null
      ? await listUnresolvedThreads(octokit, { ...session.item, number: target.prNumber })
      : [];
  if (request.mode === "threads" && threads.length === 0 && !request.request.trim()) {
    return session.notice(
      "succeeded",
      "ℹ️",
      "Nothing to do",
      "There are no unresolved review threads.",
    );
  }
  // An attempt after a crash goes on from what the earlier attempt stored.
  const resuming = run.attempt > 1 && history.fromThisJob > 0;
  // Read now: the signed image URLs last minutes, and the workspace's setup may take longer.
  // The description's images went with the turn that showed the description.
  const sources = (issue.images ?? []).filter((image) => !(itemSeen && image.inDescription));
  const images = resuming
    ? NO_IMAGES
    : await readJobImages(db, chat.id, sources, { ...deps.imageFetch, signal: run.signal });
  // What failed, read before the workspace opens: the model's first request carries it.
  const ci = request.mode === "ci" ? await ciFailures(session, run.signal) : undefined;
  if (pushes(request.mode)) await updateJob(db, job.id, { branch: target.branch });
  // An automation's run on the issue that started it; a retry someone asked for is theirs.
  const automation = job.trigger === "automation" ? context.automation?.name : undefined;
  const labels =
    request.mode === "triage" ? await repositoryLabels(octokit, session.item) : undefined;

  const token = await deps.installationToken(job.installationId);
  const ws = await openJobWorkspace({
    dataDir: deps.dataDir,
    provider: providerFor(deps.provider ?? "sandbox", settings.settings.isolation, deps.vmProvider),
    spareCheckouts: deps.spareCheckouts ?? SPARE_REPOSITORIES,
    pool: deps.vmPool,
    jobId: job.id,
    attempt: run.attempt,
    cloneUrl: context.cloneUrl,
    auth: { token },
    branch: target.branch,
    defaultBranch: context.defaultBranch,
    allowHosts: settings.settings.network.allow,
    allowPrivate: deps.allowPrivate ?? [],
    limits: deps.sandboxLimits,
    // A triage only reads the code: the setup (installing dependencies) would be time and money
    // spent on every new issue for nothing.
    setup: request.mode === "triage" ? [] : settings.settings.setup,
    signal: run.signal,
    logger: deps.logger,
    onSetupStep: (step) =>
      progress.log("setup", {
        message: `\`${step.command}\` exited ${step.result.exitCode}`,
        output: `${step.result.fullStdout}\n${step.result.fullStderr}`.slice(-20_000),
      }),
  });
  opened(ws);
  const merge =
    request.mode === "merge" ? await startMerge(ws, context.defaultBranch, run.signal) : undefined;
  if (merge === null) {
    const text = `\`${target.branch}\` already holds \`${context.defaultBranch}\`.`;
    return session.notice("succeeded", "ℹ️", "Nothing to merge", text);
  }
  progress.step("agent", `workspace ready on ${target.branch}`);

  const result = await runJobAgent({
    db,
    chatId: chat.id,
    jobId: job.id,
    mode: request.mode,
    workspace: ws.workspace,
    startSha: ws.checkout.baseSha,
    history: history.messages,
    storedCount: history.storedCount,
    instruction: resuming
      ? RESUME_INSTRUCTION
      : withImages(
          instructionFor({
            request,
            requester: job.requester,
            number: job.number,
            kind: context.itemKind,
            context: issue,
            itemSeen,
            threads,
            ...(ci && { ci }),
            ...(merge && { merge: { base: merge.base, conflicts: merge.conflicts } }),
            ...(automation !== undefined && { automation }),
            ...(labels && { labels }),
            retry: job.command === "retry",
          }),
          images,
        ),
    ...(labels && { extraPlugins: [labelPlugin(labels)] }),
    ...agentRunDeps(deps, settings),
    progress,
    signal: run.signal,
  });
  if (result.reason === "cancelled" || run.signal.aborted) return cancelled(session);
  if (result.reason === "error") return session.fail(result.error?.message ?? "the agent failed");
  // vmpilot's own push: the head its CI fixes and ready-for-review check watch.
  const onPushed = (sha: string) =>
    afterPush(db, deps.readyQueue, {
      chatId: chat.id,
      jobId: job.id,
      sha,
      settings: settings.settings,
      result,
    });
  switch (request.mode) {
    case "triage":
      return triageEnd(session, result, automation ?? "triage");
    case "plan":
      return session.end("succeeded", planBody(session, result));
    case "review":
      return session.end(
        "succeeded",
        await reviewBody(session, result, target.prNumber ?? job.number, issue),
      );
    case "merge": {
      if (!merge) throw new Error(`job ${job.id} has no merge to finish`);
      const merged = await mergeBody({
        session,
        ws,
        merge,
        token: () => deps.installationToken(job.installationId),
        result,
        author: deps.commitAuthor,
        signal: run.signal,
        onPushed,
      });
      return session.end(merged.ok ? "succeeded" : "failed", merged.body);
    }
    case "fix":
    case "threads":
    case "ci": {
      const body = await fixBody({
        session,
        db,
        chat,
        request,
        target,
        ws,
        token: () => deps.installationToken(job.installationId),
        result,
        threads,
        author: deps.commitAuthor,
        signal: run.signal,
        notes: ci ? [ci.note] : [],
        onPushed,
      });
      return session.end("succeeded", body);
    }
  }
}
