// The seam between the loop and a model API. The loop keeps its conversation in one neutral shape
// (the Messages API's, which is what the store holds) and a provider turns it into its own wire
// format for each request and its reply back into that shape.
import type Anthropic from "@anthropic-ai/sdk";
import type { TokenCounts } from "../../config/models.ts";
import type { DescribedError } from "../errors.ts";
import type { AgentTool } from "../tools/types.ts";

export type MessageParam = Anthropic.MessageParam;

export interface ModelRequest {
  /** The model's id at its provider (no provider prefix). */
  model: string;
  system: string;
  messages: readonly MessageParam[];
  tools: readonly AgentTool[];
  maxTokens: number;
  /** Text only: the compaction summary must not call tools. */
  noTools?: boolean;
  signal?: AbortSignal;
}

/** Reply blocks as the conversation stores them (request shape: text, tool_use, thinking). */
export type ReplyBlock = Anthropic.ContentBlockParam;

export type StopReason =
  | "end_turn"
  | "tool_use"
  | "max_tokens"
  | "refusal"
  | "pause_turn"
  | "model_context_window_exceeded";

export interface ModelReply {
  content: ReplyBlock[];
  stopReason: StopReason;
  usage: TokenCounts;
  /** False when the server reported no usage and the counts are estimates. */
  usageReported: boolean;
  /** Tool calls whose arguments could not be read, by id: the loop answers them with an error. */
  invalidToolInput?: Record<string, string>;
}

/** The prompt no longer fits the model's context window; the loop compacts and asks again. */
export class ContextTooLongError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ContextTooLongError";
  }
}

export interface ModelProvider {
  /** For messages: "Anthropic API", "OpenAI-compatible API ollama". */
  readonly label: string;
  /** How often a failed request is retried before it counts; said in error messages. */
  readonly maxRetries: number;
  call(request: ModelRequest): Promise<ModelReply>;
  /** One clear line for what `call` threw, or undefined when it is not this provider's error. */
  describeError(error: unknown): DescribedError | undefined;
}
