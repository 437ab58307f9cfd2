import type Anthropic from "@anthropic-ai/sdk";
import { routeModel } from "../config/model-route.ts";
import { DEFAULT_MODEL, type ResolvedModel } from "../config/models.ts";
import { loadProviders, type ProviderTable } from "../config/providers.ts";
import type { Workspace } from "../workspace/types.ts";
import {
  type CompactionOptions,
  clearOldToolResults,
  estimateTokens,
  splitForSummary,
  summaryMessage,
  summaryRequestMessages,
} from "./compaction.ts";
import { AgentFailure, describeError } from "./errors.ts";
import type { AgentEvent, AgentEventListener, FailureCode, FinishReason } from "./events.ts";
import { type AgentLimits, limitReached, remainingMs } from "./limits.ts";
import type { ClientOptions } from "./model-call.ts";
import type { Plugin } from "./plugins.ts";
import { AnthropicProvider } from "./providers/anthropic.ts";
import { OpenAiProvider, type OpenAiProviderOptions } from "./providers/openai.ts";
import {
  ContextTooLongError,
  type ModelProvider,
  type ModelReply,
  type ReplyBlock,
} from "./providers/types.ts";
import { modelRequestSpan } from "./spans.ts";
import type { BashToolOptions } from "./tools/bash.ts";
import type { EditorOptions } from "./tools/editor.ts";
import { runToolCalls } from "./tools/run-calls.ts";
import { buildToolset } from "./tools/toolset.ts";
import type { AgentTool, ToolSource } from "./tools/types.ts";
import { addUsage, emptyUsage, pricedUsage, promptTokens, type UsageTotals } from "./usage.ts";

type MessageParam = Anthropic.MessageParam;

export interface RunAgentOptions {
  workspace: Workspace;
  /** Earlier conversation to continue (plain JSON, as stored). Never modified. */
  messages?: readonly MessageParam[];
  /** The message that starts this turn. Optional when `messages` already ends with one. */
  instruction?: string | Anthropic.ContentBlockParam[];
  /** See buildSystemPrompt. */
  system: string;
  model?: string;
  /** Output tokens per request; default 16,000. */
  maxTokens?: number;
  limits?: AgentLimits;
  /** Enabled plugins: their tools are offered and their finish checks apply. */
  plugins?: readonly Plugin[];
  /**
   * Whether the workspace changed since the run began, asked when the model stops on its own
   * (end_turn) and a plugin has a finish check. Without it the checks take the workspace as changed.
   */
  changed?: () => Promise<boolean>;
  /** Tool names the run may use; default all of the native and enabled plugins' tools. */
  tools?: readonly string[];
  /** MCP servers' tools (mcp/open.ts), offered as the servers start; the caller closes them. */
  mcp?: ToolSource;
  bash?: BashToolOptions;
  editor?: EditorOptions;
  compaction?: CompactionOptions;
  onEvent?: AgentEventListener;
  /** Called for every message appended to the conversation, before the loop goes on. */
  onMessage?: (message: MessageParam) => void | Promise<void>;
  signal?: AbortSignal;
  /** For Anthropic models: an SDK client, or options to make one. */
  client?: Anthropic | ClientOptions;
  /** OpenAI-compatible providers by name; default: those the environment configures. */
  providers?: ProviderTable;
  /** Retries and timeout for OpenAI-compatible providers. */
  compatible?: OpenAiProviderOptions;
  /** A provider to use instead of the one `model` names (which still sets the prices). */
  provider?: ModelProvider;
  /** Backoff before retrying a stream that failed midway; default 1 s, doubling. */
  streamRetryDelayMs?: number;
}

export interface AgentResult {
  reason: FinishReason | "error";
  error?: { code: FailureCode; message: string };
  /** Human explanation for limits, refusals and unmet finish checks. */
  detail?: string;
  /** Messages this run appended, in order (what onMessage saw). */
  newMessages: MessageParam[];
  /** The whole conversation now; differs from earlier + new when it was compacted. */
  messages: MessageParam[];
  steps: number;
  usage: UsageTotals;
  /** False when the model was not in the price table and cost is a fallback estimate. */
  priceKnown: boolean;
  /** The model's last text; when a finish check sent it back, its answer before that comes first. */
  finalText: string;
  /** What plugin tools reported, e.g. `tests`. */
  reports: Record<string, unknown>;
}

const DEFAULT_MAX_TOKENS = 16_000;
/** Times in a row a reply may be cut off at max_tokens before the run fails. */
const MAX_CUTOFFS = 3;
/** Times the loop sends the model back to work because a plugin's finish check failed. */
const MAX_NUDGES = 2;

interface Chosen {
  provider: ModelProvider;
  /** The provider's name, for the request's span: anthropic, or an OpenAI-compatible one's. */
  providerName: string;
  model: ResolvedModel;
}

function providerFor(options: RunAgentOptions): Chosen {
  let providers = options.providers;
  if (!providers) {
    const loaded = loadProviders(process.env);
    if ("problems" in loaded)
      throw new AgentFailure("model_unavailable", loaded.problems.join("; "));
    providers = loaded.providers;
  }
  let route: ReturnType<typeof routeModel>;
  try {
    route = routeModel(options.model ?? DEFAULT_MODEL, providers);
  } catch (error) {
    throw new AgentFailure("model_unavailable", (error as Error).message);
  }
  const providerName = route.provider === "anthropic" ? "anthropic" : route.provider.name;
  if (options.provider) return { provider: options.provider, providerName, model: route.model };
  if (route.provider === "anthropic") {
    return {
      provider: new AnthropicProvider(options.client, options.streamRetryDelayMs),
      providerName,
      model: route.model,
    };
  }
  return {
    provider: new OpenAiProvider(route.provider, route.model.id, options.compatible),
    providerName,
    model: route.model,
  };
}

/**
 * Runs the model on the workspace until it stops on its own, a limit is hit, or an error remains
 * after retries. API and tool errors end the run with reason "error" (and a `failed` event); only
 * invalid options (an unknown tool in the allow-list) reject.
 */
export async function runAgent(options: RunAgentOptions): Promise<AgentResult> {
  return new AgentRun(options).execute();
}

class AgentRun {
  readonly #o: RunAgentOptions;
  #provider: ModelProvider | undefined;
  #providerName = "";
  #model: ResolvedModel | undefined;
  readonly #maxTokens: number;
  readonly #tools: AgentTool[];
  readonly #reports = new Map<string, unknown>();
  readonly #started = Date.now();
  #history: MessageParam[];
  readonly #added: MessageParam[] = [];
  #steps = 0;
  #usage = emptyUsage();
  /** The latest text of the model; after a nudge, only what came since. */
  #finalText = "";
  /** The text the model stopped on before the first nudge: the answer, kept whatever follows. */
  #answer: string | undefined;
  #cutoffs = 0;
  #nudges = 0;
  #forceCompaction = false;
  #overflowRetried = false;
  /** Prompt size the API last reported, and how many history messages it covered. */
  #measured: { tokens: number; count: number } | undefined;

  constructor(options: RunAgentOptions) {
    this.#o = options;
    this.#maxTokens = options.maxTokens ?? DEFAULT_MAX_TOKENS;
    this.#history = [...(options.messages ?? [])];
    this.#tools = buildToolset({
      workspace: options.workspace,
      plugins: options.plugins ?? [],
      allow: options.tools,
      bash: options.bash,
      editor: options.editor,
      reports: this.#reports,
    });
  }

  /** Set by execute() before any request. */
  get #chosen(): { provider: ModelProvider; model: ResolvedModel } {
    if (!this.#provider || !this.#model) throw new Error("no model chosen yet");
    return { provider: this.#provider, model: this.#model };
  }

  async execute(): Promise<AgentResult> {
    try {
      ({
        provider: this.#provider,
        providerName: this.#providerName,
        model: this.#model,
      } = providerFor(this.#o));
      if (this.#o.instruction !== undefined) {
        await this.#append({ role: "user", content: this.#o.instruction });
      }
      if (this.#history.length === 0) {
        throw new AgentFailure(
          "internal",
          "Nothing to do: give an instruction or earlier messages.",
        );
      }
      for (;;) {
        const limit = limitReached(this.#o.limits ?? {}, {
          steps: this.#steps,
          startedAt: this.#started,
          costUsd: this.#usage.costUsd,
          priceKnown: this.#chosen.model.known,
          cancelled: this.#o.signal?.aborted ?? false,
        });
        if (limit) return this.#finish(limit.reason, limit.detail);
        await this.#compactIfNeeded();
        this.#steps++;
        this.#emit({ type: "step_started", step: this.#steps });
        const message = await this.#requestHistory();
        if (!message) continue;
        for (const block of message.content) {
          if (block.type === "text" && block.text)
            this.#emit({ type: "text", step: this.#steps, text: block.text });
        }
        const end = await this.#handle(message);
        if (end) return this.#finish(end.reason, end.detail);
      }
    } catch (error) {
      if (this.#o.signal?.aborted) return this.#finish("cancelled", "The run was cancelled.");
      return this.#fail(error);
    }
  }

  /**
   * The next reply to the conversation. A prompt the server finds too long for the model is
   * compacted and asked again, once (undefined: go round); the next time the run fails.
   */
  async #requestHistory(): Promise<ModelReply | undefined> {
    try {
      return await this.#request(this.#history);
    } catch (error) {
      if (!(error instanceof ContextTooLongError)) throw error;
      if (this.#overflowRetried) {
        throw new AgentFailure(
          "context_overflow",
          `The conversation does not fit the model's context window, even compacted: ${error.message}`,
        );
      }
      this.#overflowRetried = true;
      this.#forceCompaction = true;
      return undefined;
    }
  }

  async #handle(
    message: ModelReply,
  ): Promise<{ reason: FinishReason; detail?: string } | undefined> {
    const content = message.content;
    switch (message.stopReason) {
      case "refusal":
        // The refused reply is not kept: a later turn can continue from the user's last message.
        return {
          reason: "refusal",
          detail: `The model declined to continue. ${textOf(content)}`.trim(),
        };
      case "pause_turn":
        await this.#appendAssistant(content);
        return undefined;
      case "tool_use":
        this.#cutoffs = 0;
        await this.#appendAssistant(content);
        await this.#append({
          role: "user",
          content: await this.#runTools(content, notRun(message.invalidToolInput)),
        });
        return undefined;
      case "max_tokens":
      case "model_context_window_exceeded":
        await this.#continueCutOff(message);
        return undefined;
      default: {
        this.#cutoffs = 0;
        await this.#appendAssistant(content);
        const unmet = await this.#unmetFinishCheck();
        if (unmet && this.#nudges < MAX_NUDGES) {
          this.#nudges++;
          if (this.#answer === undefined) {
            this.#answer = this.#finalText;
            this.#finalText = "";
          }
          await this.#append({ role: "user", content: unmet });
          return undefined;
        }
        return { reason: "end_turn", detail: unmet && `Finished with a check unmet: ${unmet}` };
      }
    }
  }

  /** A reply stopped by the output or context limit: finish its complete tool calls, then ask for the rest. */
  async #continueCutOff(message: ModelReply): Promise<void> {
    this.#cutoffs++;
    const limit =
      message.stopReason === "max_tokens"
        ? `max_tokens = ${this.#maxTokens}`
        : "the context window";
    if (this.#cutoffs > MAX_CUTOFFS) {
      throw new AgentFailure(
        "output_cut_off",
        `The model's reply was cut off by ${limit} ${this.#cutoffs} times in a row; raise maxTokens or split the task.`,
      );
    }
    if (message.stopReason === "model_context_window_exceeded") this.#forceCompaction = true;
    await this.#appendAssistant(message.content);
    const last = message.content.at(-1);
    const cutOff = last?.type === "tool_use" ? last.id : undefined;
    const refused = notRun(message.invalidToolInput);
    if (cutOff) {
      refused.set(
        cutOff,
        `This tool call was cut off by ${limit} before its input was complete, so it was not run. Send it again with a smaller input (for example, write a large file in several steps).`,
      );
    }
    const reply: Anthropic.ContentBlockParam[] = await this.#runTools(message.content, refused);
    if (!cutOff) {
      reply.push({
        type: "text",
        text: `Your reply was cut off by ${limit}. Continue exactly where you stopped.`,
      });
    }
    await this.#append({ role: "user", content: reply });
  }

  #runTools(content: ReplyBlock[], refused: ReadonlyMap<string, string>) {
    return runToolCalls(content, {
      tools: this.#tools,
      step: this.#steps,
      signal: this.#o.signal,
      remainingMs: () => remainingMs(this.#o.limits ?? {}, this.#started),
      emit: (event) => this.#emit(event),
      notRun: refused,
      find: (name) => this.#o.mcp?.find(name),
    });
  }

  async #unmetFinishCheck(): Promise<string | undefined> {
    const checks = (this.#o.plugins ?? []).flatMap((p) => (p.finishCheck ? [p.finishCheck] : []));
    if (checks.length === 0) return undefined;
    const run = { changed: (await this.#o.changed?.()) ?? true };
    for (const check of checks) {
      const unmet = check(this.#reports, run);
      if (unmet) return unmet;
    }
    return undefined;
  }

  /** The answer, then what the model said after being sent back, if anything new. */
  get #text(): string {
    const answer = this.#answer;
    const after = this.#finalText;
    if (!answer || !after || after === answer) return answer || after;
    return `${answer}\n\n${after}`;
  }

  async #request(messages: MessageParam[], noTools = false): Promise<ModelReply> {
    const { provider, model } = this.#chosen;
    const request = { provider: this.#providerName, model: model.id, maxTokens: this.#maxTokens };
    const { reply, usage: spent } = await modelRequestSpan(request, async () => {
      const reply = await provider.call({
        model: model.id,
        system: this.#o.system,
        messages,
        tools: this.#o.mcp ? [...this.#tools, ...(await this.#o.mcp.offered())] : this.#tools,
        maxTokens: this.#maxTokens,
        noTools,
        signal: this.#o.signal,
      });
      return { reply, usage: pricedUsage(model, reply.usage) };
    });
    this.#usage = addUsage(this.#usage, spent);
    this.#emit({
      type: "usage",
      step: this.#steps,
      request: spent,
      totals: this.#usage,
      priceKnown: model.known,
    });
    if (messages === this.#history) {
      // The reply is appended next; its output tokens are part of the following prompt.
      this.#measured = {
        tokens: promptTokens(spent) + spent.outputTokens,
        count: messages.length + 1,
      };
    }
    return reply;
  }

  /** The prompt the next request would send, from the last measured usage plus what came since. */
  #promptEstimate(): number {
    if (!this.#measured) {
      return (
        estimateTokens(this.#o.system) +
        estimateTokens(this.#tools.map((t) => t.definition)) +
        estimateTokens(this.#history)
      );
    }
    return this.#measured.tokens + estimateTokens(this.#history.slice(this.#measured.count));
  }

  async #compactIfNeeded(): Promise<void> {
    const settings = this.#o.compaction ?? {};
    const window = settings.contextWindow ?? this.#chosen.model.contextWindow;
    const limit = Math.min(window * (settings.threshold ?? 0.8), window - this.#maxTokens);
    const before = this.#promptEstimate();
    const forced = this.#forceCompaction;
    this.#forceCompaction = false;
    if (!forced && before < limit) return;

    const cleared = clearOldToolResults(this.#history, settings.keepToolResults ?? 6);
    let messages = cleared.messages;
    let after = before - cleared.tokensFreed;
    let summarized = 0;
    if (after >= limit || (forced && cleared.cleared === 0)) {
      const split = splitForSummary(messages, settings.keepMessages ?? 6);
      if (split) {
        const reply = await this.#request(summaryRequestMessages(split.head), true);
        const summary = textOf(reply.content);
        if (!summary)
          throw new AgentFailure(
            "context_overflow",
            "The model returned an empty summary while compacting the conversation.",
          );
        const replacement = summaryMessage(summary);
        messages = [replacement, ...split.tail];
        summarized = split.head.length;
        after = after - estimateTokens(split.head) + estimateTokens(replacement);
      }
    }
    if (cleared.cleared === 0 && summarized === 0) {
      if (forced)
        throw new AgentFailure(
          "context_overflow",
          "The conversation fills the context window and cannot be compacted further.",
        );
      return;
    }
    this.#history = messages;
    this.#measured = { tokens: after, count: messages.length };
    this.#emit({
      type: "compacted",
      step: this.#steps,
      clearedToolResults: cleared.cleared,
      summarizedMessages: summarized,
      tokensBefore: before,
      tokensAfter: after,
      messages: [...messages],
    });
  }

  async #appendAssistant(content: ReplyBlock[]): Promise<void> {
    // An empty assistant message is only valid last; the API merges the user messages around it.
    if (content.length === 0) return;
    const text = textOf(content);
    if (text) this.#finalText = text;
    await this.#append({ role: "assistant", content });
  }

  async #append(message: MessageParam): Promise<void> {
    this.#history.push(message);
    this.#added.push(message);
    await this.#o.onMessage?.(message);
  }

  #emit(event: AgentEvent): void {
    this.#o.onEvent?.(event);
  }

  #result(reason: AgentResult["reason"], extra: Partial<AgentResult> = {}): AgentResult {
    return {
      reason,
      newMessages: [...this.#added],
      messages: [...this.#history],
      steps: this.#steps,
      usage: this.#usage,
      priceKnown: this.#model?.known ?? true,
      finalText: this.#text,
      reports: Object.fromEntries(this.#reports),
      ...extra,
    };
  }

  #finish(reason: FinishReason, detail?: string): AgentResult {
    this.#emit({
      type: "finished",
      reason,
      steps: this.#steps,
      usage: this.#usage,
      finalText: this.#text,
      ...(detail && { detail }),
    });
    return this.#result(reason, detail ? { detail } : {});
  }

  #fail(error: unknown): AgentResult {
    const { code, message } = describeError(error, {
      describeError: (e) => this.#provider?.describeError(e),
    });
    this.#emit({ type: "failed", code, error: message, steps: this.#steps, usage: this.#usage });
    return this.#result("error", { error: { code, message } });
  }
}

function textOf(content: readonly ReplyBlock[]): string {
  return content
    .flatMap((b) => (b.type === "text" ? [b.text] : []))
    .join("\n")
    .trim();
}

/** The provider's unreadable tool calls, as answers for runToolCalls. */
function notRun(invalid: Record<string, string> | undefined): Map<string, string> {
  return new Map(Object.entries(invalid ?? {}));
}
