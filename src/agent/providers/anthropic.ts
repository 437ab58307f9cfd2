import Anthropic from "@anthropic-ai/sdk";
import type { TokenCounts } from "../../config/models.ts";
import { withCacheBreakpoints } from "../cache.ts";
import type { DescribedError } from "../errors.ts";
import { type ClientOptions, callModel, createClient } from "../model-call.ts";
import { mergeUserTurns } from "../turns.ts";
import { describeAnthropicError } from "./anthropic-errors.ts";
import type { ModelProvider, ModelReply, ModelRequest, ReplyBlock, StopReason } from "./types.ts";

const STOP_REASONS = new Set<string>([
  "end_turn",
  "tool_use",
  "max_tokens",
  "refusal",
  "pause_turn",
  "model_context_window_exceeded",
]);

function tokensOf(usage: Anthropic.Usage): TokenCounts {
  return {
    inputTokens: usage.input_tokens,
    outputTokens: usage.output_tokens,
    cacheCreationInputTokens: usage.cache_creation_input_tokens ?? 0,
    cacheReadInputTokens: usage.cache_read_input_tokens ?? 0,
    cacheCreation1hInputTokens: usage.cache_creation?.ephemeral_1h_input_tokens ?? 0,
  };
}

/** Response blocks are valid request blocks; drop the fields only responses carry. */
function toParam(block: Anthropic.ContentBlock): ReplyBlock {
  if (block.type === "text") {
    return block.citations
      ? { type: "text", text: block.text, citations: block.citations }
      : { type: "text", text: block.text };
  }
  if (block.type === "tool_use")
    return { type: "tool_use", id: block.id, name: block.name, input: block.input };
  return block as ReplyBlock;
}

/** The Messages API, with its native tools and prompt caching. */
export class AnthropicProvider implements ModelProvider {
  readonly label = "Anthropic API";
  readonly #client: Anthropic;
  readonly #retryDelayMs: number;

  constructor(client?: Anthropic | ClientOptions, streamRetryDelayMs = 1000) {
    this.#client = client instanceof Anthropic ? client : createClient(client);
    this.#retryDelayMs = streamRetryDelayMs;
  }

  get maxRetries(): number {
    return this.#client.maxRetries;
  }

  async call(request: ModelRequest): Promise<ModelReply> {
    const cached = withCacheBreakpoints({
      tools: request.tools.map((t) => t.definition),
      system: request.system,
      messages: mergeUserTurns(request.messages),
    });
    const message = await callModel(
      this.#client,
      {
        model: request.model,
        max_tokens: request.maxTokens,
        system: cached.system,
        messages: cached.messages,
        ...(cached.tools.length > 0 && { tools: cached.tools }),
        ...(request.noTools && { tool_choice: { type: "none" } }),
      },
      {
        signal: request.signal,
        streamRetries: this.#client.maxRetries,
        retryDelayMs: this.#retryDelayMs,
      },
    );
    const stop = message.stop_reason ?? "end_turn";
    return {
      content: message.content.map(toParam),
      stopReason: (STOP_REASONS.has(stop) ? stop : "end_turn") as StopReason,
      usage: tokensOf(message.usage),
      usageReported: true,
    };
  }

  describeError(error: unknown): DescribedError | undefined {
    return describeAnthropicError(error, this.#client.maxRetries);
  }
}
