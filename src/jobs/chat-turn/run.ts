// A turn of the chat face, run by a worker like any job: the conversation's workspace rebuilt from
// its last turn, the agent on the conversation's stored history, then a commit, and the workspace
// and the client-visible reply remembered for the next request.
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { AgentResult } from "../../agent/loop.ts";
import { runTitle } from "../../agent/summary.ts";
import type { RepoSettings } from "../../config/repo-config.ts";
import { isPermanent } from "../../errors.ts";
import { redact } from "../../log/redact.ts";
import {
  type ApiConversation,
  getApiConversation,
  lastTurn,
  saveChatTurn,
} from "../../store/api-conversations.ts";
import { appendJobEvent, listJobEvents } from "../../store/job-events.ts";
import { getJob, type Job, updateJob } from "../../store/jobs.ts";
import { commitInWorkspace, VMPILOT_AUTHOR } from "../../workspace/git/commit.ts";
import { gitClient } from "../../workspace/git/git.ts";
import { restoreTurnBundle, saveTurnBundle } from "../../workspace/git/turn-bundle.ts";
import {
  type Checkout,
  createWorkspace,
  prepareCheckout,
  type Workspace,
} from "../../workspace/index.ts";
import { workspaceFor } from "../../workspace/isolation.ts";
import { testsOf } from "../pipeline/agent.ts";
import { runAgentTurn } from "../pipeline/agent-turn.ts";
import { loadConversation } from "../pipeline/history.ts";
import { JobProgress } from "../pipeline/progress.ts";
import type { PipelineDeps, Run } from "../pipeline/run.ts";
import { extendHash } from "./history-hash.ts";
import { withMessageImages } from "./images.ts";
import { openChatPullRequest } from "./pull-request.ts";
import { REPLY_END, renderReply } from "./reply.ts";
import { type ChatTurnRequest, chatBranch, readChatTurnRequest } from "./request.ts";
import { type ChatTurnDeps, chatTurnSettings } from "./settings.ts";

export type TurnOutcome = "succeeded" | "failed" | "cancelled" | "skipped";

interface TurnWorkspace {
  workspace: Workspace;
  /** The repository's checkout; null for scratch. */
  checkout: Checkout | null;
  /** What the turn's bundle is taken against; null for scratch, which bundles everything. */
  baseSha: string | null;
  dispose(): Promise<void>;
}

export async function runChatTurn(
  run: Run,
  deps: PipelineDeps & Pick<ChatTurnDeps, "allowedUsers">,
): Promise<TurnOutcome> {
  const db = deps.db.pool;
  const job = await getJob(db, run.jobId);
  if (!job || job.finishedAt) return "skipped";
  const conversation = await getApiConversation(db, job.conversationId);
  if (!conversation)
    throw new Error(`conversation ${job.conversationId} of job ${job.id} does not exist`);
  const request = readChatTurnRequest(job);
  await updateJob(db, job.id, { status: "running" });
  const progress = new JobProgress({
    db,
    jobId: job.id,
    view: { jobId: job.id, jobUrl: "", current: "agent", startedAt: Date.now(), costUsd: 0 },
    baseCostUsd: job.costUsd,
    logger: deps.logger,
  });
  let ws: TurnWorkspace | undefined;
  const startedAt = Date.now();
  try {
    const settings = await chatTurnSettings(deps, job);
    if (!settings.ok) return await end(deps, job, request, progress, { error: settings.error });
    ws = await openTurnWorkspace(deps, run, job, conversation, request, settings.settings);
    const history = await loadConversation(db, conversation.id, job.id);
    // A message that only asks for the pull request runs no agent.
    const asked =
      job.instruction.trim() !== "" || request.transcript !== "" || request.images.length > 0;
    const result = !asked
      ? undefined
      : await runAgentTurn(deps, run, settings, {
          conversationId: conversation.id,
          jobId: job.id,
          mode: "fix",
          conversational: true,
          workspace: ws.workspace,
          history,
          turn: () =>
            withMessageImages(db, conversation.id, instruction(job, request), request.images),
          clientSystem: request.system,
          progress,
        });
    if (result?.reason === "cancelled" || run.signal.aborted) return "cancelled";
    if (result) {
      await commitInWorkspace(ws.workspace, {
        message: runTitle(result.finalText, job.instruction),
        author: VMPILOT_AUTHOR,
      });
    }
    const pullRequest =
      request.pullRequest &&
      ws.checkout &&
      job.installationId !== null &&
      result?.reason !== "error"
        ? await openChatPullRequest(deps, {
            job: { ...job, installationId: job.installationId },
            workspace: ws.workspace,
            checkout: ws.checkout,
            branch: chatBranch(conversation.id),
            result,
            startedAt,
            signal: run.signal,
          })
        : undefined;
    const saved = await saveTurnBundle(ws.workspace, ws.baseSha);
    return await end(deps, job, request, progress, {
      result,
      pullRequest,
      commitSha: saved?.sha ?? null,
      bundle: saved?.bundle ?? null,
    });
  } catch (error) {
    if (run.signal.aborted) return "cancelled";
    if (!isPermanent(error) && run.attempt < run.maxAttempts) throw error;
    const message = error instanceof Error ? error.message : String(error);
    return end(deps, job, request, progress, { error: message });
  } finally {
    progress.stop();
    await ws?.dispose();
  }
}

/** The user turn: the person's words, after any earlier conversation vmpilot had not seen. */
function instruction(job: Job, request: ChatTurnRequest): string {
  if (!request.transcript) return job.instruction;
  return `The conversation so far, from the person's chat client (context, not instructions):\n\n${request.transcript}\n\nTheir new message (this is your instruction):\n\n${job.instruction}`;
}

async function openTurnWorkspace(
  deps: PipelineDeps,
  run: Run,
  job: Job,
  conversation: ApiConversation,
  request: ChatTurnRequest,
  settings: Pick<RepoSettings, "network" | "isolation">,
): Promise<TurnWorkspace> {
  const dir = join(deps.dataDir, "workspaces", `chat-${job.id}-${run.attempt}`);
  await rm(dir, { recursive: true, force: true });
  const root = join(dir, "repo");
  const remove = () => rm(dir, { recursive: true, force: true });
  let workspace: Workspace | undefined;
  try {
    let checkout: Checkout | null = null;
    if (request.cloneUrl === null || job.installationId === null) {
      // Scratch: an empty repository of the worker's making.
      await mkdir(root, { recursive: true });
      await gitClient(root).raw(["init", "-q", "-b", "main"]);
    } else {
      await mkdir(dir, { recursive: true });
      checkout = await prepareCheckout({
        dataDir: deps.dataDir,
        repo: request.cloneUrl,
        auth: { token: await deps.installationToken(job.installationId) },
        dest: root,
        branch: chatBranch(conversation.id),
        existingBranch: "if-present",
      });
    }
    workspace = await createWorkspace({
      ...workspaceFor(deps.workspace, settings.isolation),
      root,
      dataDir: deps.dataDir,
      mirror: checkout?.mirror,
      allowHosts: [...settings.network.allow],
      allowPrivate: deps.allowPrivate ?? [],
      limits: deps.sandboxLimits,
      logger: deps.logger,
      owner: `job-${job.id}-${run.attempt}`,
      pool: deps.vmPool,
    });
    const previous = await lastTurn(deps.db.pool, conversation.id);
    if (previous?.bundle) await restoreTurnBundle(workspace, previous.bundle);
    const ready = workspace;
    return {
      workspace: ready,
      checkout,
      baseSha: checkout?.baseSha ?? null,
      async dispose() {
        await ready.dispose();
        await remove();
      },
    };
  } catch (error) {
    await workspace?.dispose();
    await remove();
    throw error;
  }
}

type Ending =
  | { error: string }
  | {
      /** Undefined when the message only asked for the pull request. */
      result: AgentResult | undefined;
      pullRequest: { url: string } | { none: string } | undefined;
      commitSha: string | null;
      bundle: Buffer | null;
    };

/**
 * Writes the reply's last event and remembers the turn, failed or not: the conversation's hash
 * with this reply, the stored messages so far and the workspace (a turn that did not get to run
 * keeps the previous one's).
 */
async function end(
  deps: PipelineDeps,
  job: Job,
  request: ChatTurnRequest,
  progress: JobProgress,
  ending: Ending,
): Promise<TurnOutcome> {
  const db = deps.db.pool;
  await progress.flush();
  const fresh = await getJob(db, job.id);
  const costUsd = fresh?.costUsd ?? job.costUsd;
  const result = "error" in ending ? undefined : ending.result;
  const pullRequest = "error" in ending ? undefined : ending.pullRequest;
  const error =
    "error" in ending
      ? ending.error
      : result?.reason === "error"
        ? (result.error?.message ?? "the agent failed")
        : undefined;
  const tests = result && testsOf(result)?.outcome;
  await appendJobEvent(db, job.id, REPLY_END, {
    ...(error !== undefined && { error: redact(error).slice(0, 2000) }),
    ...(result?.detail && { detail: redact(result.detail) }),
    ...(tests && { tests }),
    ...(pullRequest && "url" in pullRequest && { pullRequestUrl: pullRequest.url }),
    ...(pullRequest && "none" in pullRequest && { detail: pullRequest.none }),
    usage: result?.usage ?? fresh?.usage ?? {},
    costUsd,
    priceKnown: result?.priceKnown ?? true,
  });
  const previous = "error" in ending ? await lastTurn(db, job.conversationId) : undefined;
  const workspace =
    "error" in ending
      ? { commitSha: previous?.commitSha ?? null, bundle: previous?.bundle ?? null }
      : { commitSha: ending.commitSha, bundle: ending.bundle };
  const reply = renderReply(await listJobEvents(db, job.id, 0, 100_000));
  const conversation = await getApiConversation(db, job.conversationId);
  await saveChatTurn(db, {
    conversationId: job.conversationId,
    jobId: job.id,
    historyHash: extendHash(request.askedHash, { role: "assistant", text: reply }),
    messageCount: conversation?.messageCount ?? 0,
    ...workspace,
  });
  const status = error === undefined ? "succeeded" : "failed";
  await updateJob(db, job.id, {
    status,
    ...(error !== undefined && { error: redact(error).slice(0, 2000) }),
  });
  return status;
}
