// The one way a job runs the model (an issue job, a chat turn, a scheduled run alike): the agent on
// the conversation's stored history with the worker's model clients and plugins, within the
// granted settings; every new message stored as it comes, every event logged and shown. A first
// attempt adds the new turn; one after a crash goes on from what the earlier attempt stored. A run
// that finished is kept before it is delivered, and an attempt redone after that delivers the kept
// run without running the model (kept.ts). A run that delivers a diff gets a second look at it
// first (second-look.ts), a turn of the same agent. The repository's lessons from review are read
// from its default branch into the prompt (memory.ts).
import type Anthropic from "@anthropic-ai/sdk";
import type { AgentEvent } from "../../agent/events.ts";
import type { AgentLimits } from "../../agent/limits.ts";
import { type AgentResult, runAgent } from "../../agent/loop.ts";
import { publicEgress } from "../../agent/mcp/http.ts";
import { openMcp, serverLine } from "../../agent/mcp/open.ts";
import { type ClientOptions, createClient } from "../../agent/model-call.ts";
import { DEFAULT_ENABLED_PLUGINS, type Plugin, selectPlugins } from "../../agent/plugins.ts";
import { buildSystemPrompt } from "../../agent/prompt.ts";
import type { OpenAiProviderOptions } from "../../agent/providers/openai.ts";
import { agentRunSpan } from "../../agent/spans.ts";
import type { ToolSource } from "../../agent/tools/types.ts";
import type { ProviderTable } from "../../config/providers.ts";
import type { RepoSettings } from "../../config/repo-config.ts";
import type { RunCost, TestsSummary } from "../../github/progress-comment.ts";
import type { Logger } from "../../log/logger.ts";
import { saveCompaction } from "../../store/compactions.ts";
import { McpServerState } from "../../store/job-event-kinds.ts";
import type { Job } from "../../store/jobs.ts";
import type { KeptRun } from "../../store/kept-runs.ts";
import { appendMessage } from "../../store/messages.ts";
import type { Queryable } from "../../store/sql.ts";
import { changedSince, headOf } from "../../workspace/git/commit.ts";
import type { Checkout } from "../../workspace/index.ts";
import type { Workspace } from "../../workspace/types.ts";
import type { JobDeps, Run } from "./deps.ts";
import { type LoadedConversation, loadConversation, resumes } from "./history.ts";
import { keep, takeUp } from "./kept.ts";
import { readMemory } from "./memory.ts";
import type { JobProgress } from "./progress.ts";
import { type Looked, secondLook } from "./second-look.ts";
import type { Granted } from "./settings.ts";
import type { JobWorkspace } from "./workspace.ts";

/**
 * What a job is asked to do: change the code (fix, threads, ci, merge), only read it, or, with no
 * agent at all, remember a lesson.
 */
export type Mode = "fix" | "plan" | "review" | "threads" | "merge" | "ci" | "triage" | "remember";

const RESUME_INSTRUCTION =
  "The previous attempt of this job was interrupted (the worker stopped), and its workspace was lost: the checkout is fresh. Continue the task from the conversation above, and redo any changes that are not in the workspace.";

interface JobAgentInput {
  db: Queryable;
  conversationId: number;
  jobId: number;
  mode: Mode;
  /**
   * A chat turn: it may be only a question, so the person, not the plugins' finish checks,
   * decides when tests run.
   */
  conversational?: boolean;
  workspace: Workspace;
  /** How many stored messages the conversation so far stands for (see loadConversation). */
  storedCount: number;
  /** A chat client's system message, for a chat turn. */
  clientSystem?: string;
  /** The repository's lessons from review (memory.ts). */
  memory?: { path: string; text: string };
  /** Where the repository's instructions are read instead of the workspace (prompt.ts). */
  instructions?: Pick<Workspace, "readFile">;
  /** Plugins of this run alone (triage's apply_labels), offered even in a read-only mode. */
  extraPlugins?: readonly Plugin[];
  settings: RepoSettings;
  available: readonly Plugin[];
  anthropic?: Anthropic | ClientOptions;
  providers: ProviderTable;
  compatible?: OpenAiProviderOptions;
  streamRetryDelayMs?: number;
  progress: Pick<JobProgress, "step" | "onEvent">;
  logger: Logger;
  signal: AbortSignal;
  /** The MCP servers' tools, when the settings name servers and the mode may use them. */
  mcp?: ToolSource;
}

/** The message that starts the turn: text, or text and images. */
type Instruction = string | Anthropic.ContentBlockParam[];

/** The modes that change no file: bash to read with, and no editor. */
const READ_ONLY: ReadonlySet<Mode> = new Set(["plan", "review", "triage"]);

/**
 * The modes whose work goes out as a diff of the job's own making, which gets a second look. A
 * merge pushes the base's changes with its resolution, and a chat turn's person reads each turn.
 */
const LOOKED_AT: ReadonlySet<Mode> = new Set(["fix", "threads", "ci"]);

/** Read-only modes get no tests to report and no editor; reviews get the code_review guidance. */
function pluginsFor(mode: Mode, enabled: readonly string[], available: readonly Plugin[]) {
  let names = enabled.length > 0 ? [...enabled] : [...DEFAULT_ENABLED_PLUGINS];
  if (READ_ONLY.has(mode)) names = names.filter((n) => n !== "testing");
  if (mode === "review" && !names.includes("code_review")) names.push("code_review");
  return selectPlugins(available, names);
}

/**
 * What a kind gets of its agent run, and delivers: the run's end, usage and reports (the messages
 * themselves are stored as they come). The same for a run an earlier attempt kept.
 */
export type JobRun = Omit<Looked, "newMessages" | "messages">;

export function testsOf(result: JobRun): TestsSummary | undefined {
  const tests = result.reports.tests as TestsSummary | undefined;
  return tests?.outcome ? tests : undefined;
}

/**
 * The line of what a job took, for its final comment and its pull request: null when the
 * repository turned it off. `costUsd` is the job's, earlier attempts included; a run that did not
 * happen (a chat turn that only asked for the pull request) took no steps and no tokens.
 */
export function runCost(
  settings: Pick<RepoSettings, "model" | "showCost">,
  result: JobRun | undefined,
  costUsd: number,
): RunCost | null {
  if (!settings.showCost) return null;
  return {
    model: settings.model,
    steps: result?.steps ?? 0,
    inputTokens: result?.usage.inputTokens ?? 0,
    outputTokens: result?.usage.outputTokens ?? 0,
    cacheReadInputTokens: result?.usage.cacheReadInputTokens ?? 0,
    cacheCreationInputTokens: result?.usage.cacheCreationInputTokens ?? 0,
    costUsd,
    priceKnown: result?.priceKnown ?? true,
  };
}

/** One turn of a job's agent on the conversation so far, within these limits. */
interface AgentTurn {
  messages: Anthropic.MessageParam[];
  instruction: Instruction;
  limits: AgentLimits;
  /** Whether the work changed since the turn began, for the plugins' finish checks. */
  changed(): Promise<boolean>;
  /** Every event goes to the progress through this, as the turn's place in the job asks. */
  onEvent?(event: AgentEvent): AgentEvent;
}

/**
 * The job's agent: its plugins, client and system prompt, made once, so that every turn of the
 * job (the work, its second look) sends the same prefix and reads it from the prompt cache; every
 * message stored as it comes.
 */
async function openAgent(input: JobAgentInput): Promise<(turn: AgentTurn) => Promise<AgentResult>> {
  const extra = input.extraPlugins ?? [];
  const selected = [...pluginsFor(input.mode, input.settings.plugins, input.available), ...extra];
  const plugins = input.conversational
    ? selected.map((plugin) => ({ ...plugin, finishCheck: undefined }))
    : selected;
  const client =
    input.anthropic && "messages" in input.anthropic
      ? input.anthropic
      : createClient(input.anthropic);
  const readOnly = READ_ONLY.has(input.mode);
  const { progress } = input;
  const system = await buildSystemPrompt({
    workspace: input.workspace,
    plugins,
    clientSystem: input.clientSystem,
    instructions: input.instructions,
    memory: input.memory,
  });
  let stored = input.storedCount;
  return async (turn) => {
    let compacted = Promise.resolve();
    const result = await runAgent({
      workspace: input.workspace,
      messages: turn.messages,
      instruction: turn.instruction,
      system,
      model: input.settings.model,
      limits: turn.limits,
      plugins,
      changed: turn.changed,
      ...(readOnly && {
        tools: ["bash", ...extra.flatMap((plugin) => plugin.tools.map((tool) => tool.name))],
      }),
      onEvent: (emitted) => {
        const event = turn.onEvent?.(emitted) ?? emitted;
        if (event.type === "tool_call" && event.name === "report_tests") progress.step("tests");
        if (event.type === "compacted") {
          // Every message so far is stored (onMessage is awaited): the compaction stands for them.
          const compaction = { coveredMessages: stored, messages: event.messages };
          compacted = compacted
            .then(() => saveCompaction(input.db, input.conversationId, compaction))
            .catch((error: unknown) => {
              input.logger.warn({ err: error, jobId: input.jobId }, "storing a compaction failed");
            });
        }
        progress.onEvent(event);
      },
      // Stored before the loop goes on, so a crash loses at most the turn in flight.
      onMessage: async (message) => {
        await appendMessage(input.db, {
          conversationId: input.conversationId,
          role: message.role,
          content: message.content,
          jobId: input.jobId,
        });
        stored++;
      },
      signal: input.signal,
      mcp: input.mcp,
      client,
      providers: input.providers,
      compatible: input.compatible,
      streamRetryDelayMs: input.streamRetryDelayMs,
    });
    await compacted;
    return result;
  };
}

/** Why a run that ended on an error failed; undefined when it did not. */
export function agentFailure(result: JobRun): string | undefined {
  return result.reason === "error" ? (result.error?.message ?? "the agent failed") : undefined;
}

/**
 * What a kind says of its agent run; the rest comes from the deps, the job, the run and the grant:
 * the job's own conversation, loaded here unless the kind loaded it already.
 */
export type AgentRun = Partial<Pick<JobAgentInput, "mode">> &
  Pick<JobAgentInput, "conversational" | "clientSystem" | "instructions" | "extraPlugins"> & {
    /** The job's workspace, as the kind left it for the run. */
    ws: JobWorkspace<Checkout | null>;
    history?: LoadedConversation;
    /** The new user message; asked for only when the attempt does not resume. */
    message(): Instruction | Promise<Instruction>;
  };

/** The text of a user message, for the second look to quote. */
function textOf(instruction: Instruction): string {
  if (typeof instruction === "string") return instruction;
  return instruction.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("\n\n");
}

/** The agent's run in the kind's workspace, or the run an earlier attempt of the job kept. */
export async function runJobAgent(
  deps: JobDeps,
  run: Run,
  job: Pick<Job, "id" | "conversationId">,
  granted: Pick<Granted, "settings" | "budgetUsd">,
  kept: KeptRun | undefined,
  input: AgentRun & { progress: JobAgentInput["progress"] & Pick<JobProgress, "log"> },
): Promise<JobRun> {
  const { ws, history: loaded, message, mode = "fix", ...rest } = input;
  if (kept) return takeUp(kept, ws, input.progress);
  const db = deps.db.pool;
  const history = loaded ?? (await loadConversation(db, job.conversationId, job.id));
  const { workspace, checkout } = ws;
  const { settings } = granted;
  const startSha = await headOf(workspace);
  const lessonsFailed = (error: unknown) =>
    deps.logger.warn({ err: error, jobId: job.id }, "reading the lessons file failed");
  const memory = checkout
    ? await readMemory(checkout.mirror, settings.memory, lessonsFailed)
    : undefined;
  // Triage may be steered by anyone's issue: it gets no tools beyond its labels.
  const mcp =
    mode === "triage"
      ? undefined
      : openMcp({
          servers: settings.mcp,
          workspace,
          secrets: deps.mcpSecrets ?? [],
          egress: {
            policy: deps.mcpEgress ?? publicEgress(deps.allowPrivate),
            allowHosts: settings.network.allow,
          },
          signal: run.signal,
          onEvent: (event) =>
            input.progress.log(McpServerState, { ...event, message: serverLine(event) }),
        });
  let result: Looked;
  try {
    const agent = await openAgent({
      ...rest,
      mcp,
      db,
      conversationId: job.conversationId,
      jobId: job.id,
      mode,
      workspace,
      storedCount: history.storedCount,
      settings,
      memory,
      available: deps.plugins,
      anthropic: deps.anthropic,
      providers: deps.providers ?? new Map(),
      compatible: deps.compatible,
      streamRetryDelayMs: deps.streamRetryDelayMs,
      logger: deps.logger,
      signal: run.signal,
    });
    const asked = resumes(run.attempt, history) ? undefined : await message();
    const limits = {
      maxSteps: settings.maxSteps,
      maxCostUsd: granted.budgetUsd,
      maxWallTimeMs: deps.maxWallTimeMs ?? settings.timeoutMinutes * 60_000,
    };
    const startedAt = Date.now();
    // The agent's run, its second look included, as the span `invoke_agent` of the job's trace.
    result = await agentRunSpan({ model: settings.model, mode }, async () => {
      const first = await agent({
        messages: history.messages,
        instruction: asked ?? RESUME_INSTRUCTION,
        limits,
        changed: () => changedSince(workspace, startSha),
      });
      const looks =
        checkout !== null &&
        settings.review.beforePullRequest &&
        LOOKED_AT.has(mode) &&
        !input.conversational &&
        !run.signal.aborted;
      if (!looks) return first;
      return secondLook({
        workspace,
        mirror: checkout.mirror,
        startSha,
        request: asked && textOf(asked),
        first,
        limits,
        startedAt,
        again: (turn) => agent({ ...turn, messages: first.messages }),
        progress: input.progress,
        signal: run.signal,
      });
    });
  } finally {
    await mcp?.close();
  }
  await keep(deps, run, workspace, startSha, result);
  return result;
}
