import type Anthropic from "@anthropic-ai/sdk";
import type { UsageTotals } from "./usage.ts";

/** Why a run ended without an error. */
export type FinishReason =
  | "end_turn"
  | "refusal"
  | "max_steps"
  | "max_wall_time"
  | "max_cost"
  | "cancelled";

/** Machine-readable kind of a failed run, next to its human message. */
export type FailureCode =
  | "api_overloaded"
  | "api_rate_limited"
  | "api_server_error"
  | "api_connection"
  | "api_auth"
  | "api_request"
  | "model_unavailable"
  | "model_without_tools"
  | "output_cut_off"
  | "context_overflow"
  | "internal";

interface StepStartedEvent {
  type: "step_started";
  step: number;
}

/** A complete text block from the model. */
interface TextEvent {
  type: "text";
  step: number;
  text: string;
}

interface ToolCallEvent {
  type: "tool_call";
  step: number;
  id: string;
  name: string;
  input: unknown;
}

interface ToolResultEvent {
  type: "tool_result";
  step: number;
  id: string;
  name: string;
  isError: boolean;
  /** What the model was sent. */
  output: string;
  /** Uncapped output for the job log, when it differs from `output`. */
  log?: string;
  durationMs: number;
}

interface UsageEvent {
  type: "usage";
  step: number;
  /** This request alone. */
  turn: UsageTotals;
  /** The run so far. */
  totals: UsageTotals;
  /** False when the model is missing from the price table and a fallback price was used. */
  priceKnown: boolean;
}

interface CompactedEvent {
  type: "compacted";
  step: number;
  /** Old tool results whose content was replaced by a placeholder. */
  clearedToolResults: number;
  /** Messages replaced by a summary (0 when clearing was enough). */
  summarizedMessages: number;
  tokensBefore: number;
  /** An estimate: the next request's usage tells the real figure. */
  tokensAfter: number;
  /** The whole conversation after compaction, for callers that store it. */
  messages: Anthropic.MessageParam[];
}

interface FinishedEvent {
  type: "finished";
  reason: FinishReason;
  steps: number;
  usage: UsageTotals;
  finalText: string;
  /** Human explanation for limits and refusals. */
  detail?: string;
}

interface FailedEvent {
  type: "failed";
  code: FailureCode;
  error: string;
  steps: number;
  usage: UsageTotals;
}

export type AgentEvent =
  | StepStartedEvent
  | TextEvent
  | ToolCallEvent
  | ToolResultEvent
  | UsageEvent
  | CompactedEvent
  | FinishedEvent
  | FailedEvent;

export type AgentEventListener = (event: AgentEvent) => void;
