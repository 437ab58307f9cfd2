// The job after its acknowledgement: settings, workspace, agent, then what its mode does with the
// run (modes/: push and open a pull request, post a plan or a review...), with the progress comment
// kept up to date all along. Safe to run again after a crash: it edits the job's one comment,
// continues the stored conversation, and finds the conversation's pull request instead of opening
// another.
import type Anthropic from "@anthropic-ai/sdk";
import type { ProbotOctokit } from "probot";
import type { AgentResult } from "../../agent/loop.ts";
import type { ClientOptions } from "../../agent/model-call.ts";
import type { Plugin } from "../../agent/plugins.ts";
import type { OpenAiProviderOptions } from "../../agent/providers/openai.ts";
import type { ProviderTable } from "../../config/providers.ts";
import type { RepoSettings } from "../../config/repo-config.ts";
import { isPermanent } from "../../errors.ts";
import type { ImageFetchOptions } from "../../github/images.ts";
import type { RepoConfigLoad } from "../../github/repo-config-loader.ts";
import type { Logger } from "../../log/logger.ts";
import type { Database } from "../../store/database.ts";
import { getIssueJob, updateJob } from "../../store/jobs.ts";
import type { CommitIdentity } from "../../workspace/git/commit.ts";
import type { SandboxLimits, WorkspaceChoice } from "../../workspace/index.ts";
import type { VmPool } from "../../workspace/vm/pool.ts";
import type { Queue, RunningJob } from "../queue.ts";
import { runAgentTurn } from "./agent-turn.ts";
import { gather } from "./gather.ts";
import { resumes } from "./history.ts";
import { type JobImages, NO_IMAGES, readJobImages } from "./images.ts";
import type { ModeExtras, ModeJob } from "./modes/mode.ts";
import { openWorkspace } from "./open-workspace.ts";
import { instructionFor, withImages } from "./request.ts";
import { openSession, type PipelineOutcome, type Session } from "./session.ts";
import { chooseTarget } from "./target.ts";
import type { JobWorkspace } from "./workspace.ts";

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
  /** WORKSPACE_ISOLATION and WORKSPACE_ENGINE; default DEFAULT_WORKSPACE (config/workspace.ts). */
  workspace?: WorkspaceChoice;
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

export type Run = Pick<RunningJob, "jobId" | "attempt" | "maxAttempts" | "signal">;

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

function cancelled(session: Session): Promise<PipelineOutcome> {
  return session.notice("cancelled", "⏹", "Stopped", "The job was cancelled before it finished.");
}

/** gather → target → workspace → agent → the mode's end. */
async function work(
  run: Run,
  deps: PipelineDeps,
  session: Session,
  repoConfig: RepoConfigLoad | undefined,
  opened: (ws: JobWorkspace) => void,
): Promise<PipelineOutcome> {
  const { job, context, progress } = session;
  const gathered = await gather(deps, session, repoConfig);
  if ("ended" in gathered) return gathered.ended;
  const { mode, ...found } = gathered;
  const target = chooseTarget({
    conversation: found.conversation,
    job,
    mode: found.request.mode,
    issue: found.issue,
    title: context.title,
    defaultBranch: context.defaultBranch,
  });
  if (!target.ok) return session.notice("refused", "🚫", target.headline, target.text);
  // An automation's run on the issue that started it; a retry someone asked for is theirs.
  const automation = job.trigger === "automation" ? context.automation?.name : undefined;
  const modeJob: ModeJob = { run, deps, session, ...found, target, automation };
  const prepared = (await mode.prepare?.(modeJob)) ?? {};
  if ("ended" in prepared) return prepared.ended;
  // Read now: the signed image URLs last minutes, and the workspace's setup may take longer.
  const images = await jobImages(modeJob);
  if (mode.pushes) await updateJob(deps.db.pool, job.id, { branch: target.branch });

  const ws = await openWorkspace(deps, run, {
    job,
    settings: found.granted.settings,
    cloneUrl: context.cloneUrl,
    branch: target.branch,
    defaultBranch: context.defaultBranch,
    setup: mode.runsSetup,
    progress,
  });
  opened(ws);
  const started = (await mode.inWorkspace?.(modeJob, ws)) ?? {};
  if ("ended" in started) return started.ended;
  progress.step("agent", `workspace ready on ${target.branch}`);

  const extras = { ...prepared, ...started };
  const result = await runAgent(modeJob, ws, extras, images);
  if (result.reason === "cancelled" || run.signal.aborted) return cancelled(session);
  if (result.reason === "error") return session.fail(result.error?.message ?? "the agent failed");
  return mode.finish(modeJob, { ws, result, extras });
}

/** The images the job shows the model; none when it resumes a turn that showed them. */
function jobImages({
  run,
  deps,
  conversation,
  history,
  issue,
  itemSeen,
}: ModeJob): Promise<JobImages> {
  if (resumes(run.attempt, history)) return Promise.resolve(NO_IMAGES);
  // The description's images went with the turn that showed the description.
  const sources = (issue.images ?? []).filter((image) => !(itemSeen && image.inDescription));
  return readJobImages(deps.db.pool, conversation.id, sources, {
    ...deps.imageFetch,
    signal: run.signal,
  });
}

function runAgent(
  job: ModeJob,
  ws: JobWorkspace,
  extras: ModeExtras,
  images: JobImages,
): Promise<AgentResult> {
  const { plugins, ...told } = extras;
  return runAgentTurn(job.deps, job.run, job.granted, {
    conversationId: job.conversation.id,
    jobId: job.session.job.id,
    mode: job.request.mode,
    workspace: ws.workspace,
    startSha: ws.checkout.baseSha,
    history: job.history,
    turn: () => withImages(instruction(job, told), images),
    ...(plugins && { extraPlugins: plugins }),
    progress: job.session.progress,
  });
}

/** The job's new user turn: the request, and what its mode read for it. */
function instruction(job: ModeJob, told: Omit<ModeExtras, "plugins">): string {
  const { session } = job;
  return instructionFor({
    request: job.request,
    requester: session.job.requester,
    number: session.job.number,
    kind: session.context.itemKind,
    context: job.issue,
    itemSeen: job.itemSeen,
    ...told,
    ...(job.automation !== undefined && { automation: job.automation }),
    retry: session.job.command === "retry",
  });
}
