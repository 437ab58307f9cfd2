// Any OpenAI-compatible Chat Completions server: OpenAI, Ollama, vLLM, OpenRouter, LiteLLM.
import OpenAI from "openai";
import type { TokenCounts } from "../../config/models.ts";
import type { OpenAiCompatible } from "../../config/providers.ts";
import { estimateTokens } from "../compaction.ts";
import { afterRetries, type DescribedError } from "../errors.ts";
import { type RawToolCall, toChatMessages, toReplyBlocks } from "./openai-messages.ts";
import { functionTools } from "./openai-tools.ts";
import {
  ContextTooLongError,
  type ModelProvider,
  type ModelReply,
  type ModelRequest,
  type StopReason,
} from "./types.ts";

type Params = Omit<OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming, "stream">;
type ApiUsage = OpenAI.Completions.CompletionUsage;

const DEFAULT_MAX_RETRIES = 4;

const NO_TOOLS =
  /does not support tools|tools? (are|is) not supported|tool.{0,20}not supported|enable-auto-tool-choice|tool_choice.{0,40}not supported/i;
const CONTEXT =
  /context_length_exceeded|context length|context window|maximum context|too many tokens|prompt is too long/i;

function stopReason(finish: string | null | undefined, calls: number): StopReason {
  // Some servers (Ollama among them) say "stop" on a reply that calls tools.
  if (calls > 0) return "tool_use";
  if (finish === "length") return "max_tokens";
  if (finish === "content_filter") return "refusal";
  return "end_turn";
}

function tokensOf(usage: ApiUsage): TokenCounts {
  const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
  return {
    inputTokens: usage.prompt_tokens - cached,
    outputTokens: usage.completion_tokens,
    cacheCreationInputTokens: 0,
    cacheReadInputTokens: cached,
  };
}

interface Accumulated {
  text: string;
  calls: RawToolCall[];
  finish: string | null | undefined;
  usage: ApiUsage | undefined;
}

export interface OpenAiProviderOptions {
  /** Retries for 408/409/429/5xx and connection errors, done by the SDK (Retry-After honoured). */
  maxRetries?: number;
  timeoutMs?: number;
}

export class OpenAiProvider implements ModelProvider {
  readonly label: string;
  readonly maxRetries: number;
  readonly #client: OpenAI;
  readonly #settings: OpenAiCompatible;
  readonly #model: string;

  constructor(settings: OpenAiCompatible, model: string, options: OpenAiProviderOptions = {}) {
    this.#settings = settings;
    this.#model = model;
    this.label = `OpenAI-compatible API "${settings.name}"`;
    this.maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    this.#client = new OpenAI({
      baseURL: settings.baseUrl,
      // A server of your own (Ollama, vLLM) needs no key; the SDK insists on some string.
      apiKey: settings.apiKey ?? "none",
      maxRetries: this.maxRetries,
      ...(options.timeoutMs !== undefined && { timeout: options.timeoutMs }),
    });
  }

  async call(request: ModelRequest): Promise<ModelReply> {
    const tools = functionTools(request.tools);
    const params: Params = {
      model: request.model,
      messages: toChatMessages(request.system, request.messages, this.#settings.vision ?? false),
      ...(this.#settings.name === "openai"
        ? { max_completion_tokens: request.maxTokens }
        : { max_tokens: request.maxTokens }),
      ...(tools.length > 0 && { tools }),
      ...(tools.length > 0 && request.noTools && { tool_choice: "none" as const }),
      ...(this.#settings.reasoningEffort && { reasoning_effort: this.#settings.reasoningEffort }),
    };
    let reply: Accumulated;
    try {
      reply = this.#settings.stream
        ? await this.#streamed(params, request.signal)
        : await this.#whole(params, request.signal);
    } catch (error) {
      if (error instanceof OpenAI.APIError && error.status === 400 && CONTEXT.test(detail(error))) {
        throw new ContextTooLongError(`${this.label}: ${detail(error)}`);
      }
      throw error;
    }
    const { content, invalid } = toReplyBlocks(reply.text, reply.calls);
    const usage: TokenCounts = reply.usage
      ? tokensOf(reply.usage)
      : {
          // The server sent no usage: estimates keep the cost limits working.
          inputTokens: estimateTokens(params.messages) + estimateTokens(tools),
          outputTokens: estimateTokens(content),
          cacheCreationInputTokens: 0,
          cacheReadInputTokens: 0,
        };
    return {
      content,
      stopReason: stopReason(reply.finish, reply.calls.length),
      usage,
      usageReported: reply.usage !== undefined,
      ...(Object.keys(invalid).length > 0 && { invalidToolInput: invalid }),
    };
  }

  async #streamed(params: Params, signal?: AbortSignal): Promise<Accumulated> {
    const stream = await this.#client.chat.completions.create(
      { ...params, stream: true, stream_options: { include_usage: true } },
      { signal },
    );
    const reply: Accumulated = { text: "", calls: [], finish: undefined, usage: undefined };
    for await (const chunk of stream) {
      if (chunk.usage) reply.usage = chunk.usage;
      const choice = chunk.choices[0];
      if (!choice) continue;
      // Reasoning text (`reasoning_content`, `reasoning`) is not part of the reply: never kept.
      if (choice.delta.content) reply.text += choice.delta.content;
      for (const delta of choice.delta.tool_calls ?? []) {
        const index = delta.index ?? reply.calls.length;
        reply.calls[index] ??= { id: "", name: "", arguments: "" };
        const call = reply.calls[index];
        if (delta.id) call.id = delta.id;
        if (delta.function?.name && !call.name) call.name = delta.function.name;
        if (delta.function?.arguments) call.arguments += delta.function.arguments;
      }
      if (choice.finish_reason) reply.finish = choice.finish_reason;
    }
    reply.calls = reply.calls.filter(Boolean);
    return reply;
  }

  async #whole(params: Params, signal?: AbortSignal): Promise<Accumulated> {
    const completion = await this.#client.chat.completions.create(
      { ...params, stream: false },
      { signal },
    );
    const choice = completion.choices[0];
    const calls = (choice?.message.tool_calls ?? []).flatMap((call) =>
      call.type === "function"
        ? [{ id: call.id, name: call.function.name, arguments: call.function.arguments }]
        : [],
    );
    return {
      text: choice?.message.content ?? "",
      calls,
      finish: choice?.finish_reason,
      usage: completion.usage,
    };
  }

  describeError(error: unknown): DescribedError | undefined {
    const after = afterRetries(this.maxRetries);
    const at = `${this.label} (${this.#settings.baseUrl})`;
    if (error instanceof OpenAI.APIConnectionError) {
      const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
      return { code: "api_connection", message: `Could not reach the ${at} ${after}${cause}` };
    }
    if (!(error instanceof OpenAI.APIError)) return undefined;
    const text = detail(error);
    const status = error.status;
    if (status === undefined) {
      return { code: "api_server_error", message: `${at} failed while streaming: ${text}` };
    }
    if (status === 401 || status === 403) {
      const key = this.#settings.name === "openai" ? "OPENAI_API_KEY" : "its apiKey";
      return {
        code: "api_auth",
        message: `The ${at} refused the credentials (${status}): ${text}. Check ${key}.`,
      };
    }
    if (status === 404) {
      return {
        code: "api_request",
        message: `The ${at} has no model ${this.#model} (404): ${text}`,
      };
    }
    if (status === 429) {
      return { code: "api_rate_limited", message: `The ${at} rate limit (429) ${after}: ${text}` };
    }
    if (status >= 500) {
      return {
        code: "api_server_error",
        message: `The ${at} server error (${status}) ${after}: ${text}`,
      };
    }
    if (NO_TOOLS.test(text)) {
      return {
        code: "model_without_tools",
        message: `The model ${this.#model} at the ${at} does not support tool calls, which vmpilot needs: pick a model with tool support (${text})`,
      };
    }
    return { code: "api_request", message: `The ${at} rejected the request (${status}): ${text}` };
  }
}

function detail(error: InstanceType<typeof OpenAI.APIError>): string {
  const body = error.error as { message?: unknown } | undefined;
  return typeof body?.message === "string" ? body.message : error.message;
}
