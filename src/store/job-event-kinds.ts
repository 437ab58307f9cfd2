// What the events of a job's log hold: one definition per event, which types its writer and
// parses it where it is shown (the job page and its live stream, the chat face's replies). A row
// is a type and free JSON, written by every version of the app since the table began, so a reader
// gets a known type with the shape its renderers read, or an `other` event, shown by its name and
// message. An event stored with an odd shape falls back to `other` rather than breaking a page;
// a figure an older row lacks counts as 0.
import { z } from "zod";
import { defineJobEvent, type JobEventDefinition } from "./job-events.ts";

const tokens = z.number().default(0);

/** A request's or a run's tokens and cost; a figure not stored counts as 0. */
const Usage = z.object({
  inputTokens: tokens,
  outputTokens: tokens,
  cacheReadInputTokens: tokens,
  cacheCreationInputTokens: tokens,
  /** Part of `cacheCreationInputTokens` written with the 1-hour TTL, when the API says. */
  cacheCreation1hInputTokens: z.number().optional(),
  costUsd: tokens,
});
export type StoredUsage = z.infer<typeof Usage>;

const NO_USAGE: StoredUsage = Usage.parse({});

/** Usage stored anywhere (an event, a job row), all zero when it is not usage at all. */
export function storedUsage(value: unknown): StoredUsage {
  return Usage.catch(NO_USAGE).parse(value ?? {});
}

/** Why a run ended without an error. */
const FinishReason = z.enum([
  "end_turn",
  "refusal",
  "max_steps",
  "max_wall_time",
  "max_cost",
  "cancelled",
]);

/** Machine-readable kind of a failed run, next to its human message. */
const FailureCode = z.enum([
  "api_overloaded",
  "api_rate_limited",
  "api_server_error",
  "api_connection",
  "api_auth",
  "api_request",
  "model_unavailable",
  "model_without_tools",
  "output_cut_off",
  "context_overflow",
  "internal",
]);

const step = z.number().default(0);
const usage = Usage.default(NO_USAGE);

// The agent loop's events, stored as the loop emits them (see src/agent/events.ts).

const StepStarted = defineJobEvent("step_started", z.object({ step: z.number() }));

/** A complete text block from the model. */
export const Text = defineJobEvent("text", z.object({ step, text: z.string() }));

const ToolCall = defineJobEvent(
  "tool_call",
  z.object({ step, id: z.string().default(""), name: z.string(), input: z.unknown() }),
);

const ToolResult = defineJobEvent(
  "tool_result",
  z.object({
    step,
    id: z.string().default(""),
    name: z.string(),
    isError: z.boolean().default(false),
    /** What the model was sent. */
    output: z.string().default(""),
    /** Uncapped output for the job log, when it differs from `output`. */
    log: z.string().optional(),
    durationMs: z.number().optional(),
  }),
);

const RequestUsage = defineJobEvent(
  "usage",
  z.object({
    step,
    /** This request alone. */
    request: usage,
    /** The run so far. */
    totals: usage,
    /** False when the model is missing from the price table and a fallback price was used. */
    priceKnown: z.boolean().default(true),
  }),
);

const Compacted = defineJobEvent(
  "compacted",
  z.object({
    step,
    /** Old tool results whose content was replaced by a placeholder. */
    clearedToolResults: z.number(),
    /** Messages replaced by a summary (0 when clearing was enough). */
    summarizedMessages: z.number(),
    tokensBefore: z.number(),
    /** An estimate: the next request's usage tells the real figure. */
    tokensAfter: z.number(),
  }),
);

const Finished = defineJobEvent(
  "finished",
  z.object({
    reason: FinishReason,
    steps: z.number(),
    usage,
    finalText: z.string().default(""),
    /** Human explanation for limits and refusals. */
    detail: z.string().optional(),
  }),
);

const Failed = defineJobEvent(
  "failed",
  z.object({ code: FailureCode, error: z.string(), steps: z.number().default(0), usage }),
);

/** The loop's events by type, for storing one as it comes. */
export const AGENT_EVENTS = {
  step_started: StepStarted,
  text: Text,
  tool_call: ToolCall,
  tool_result: ToolResult,
  usage: RequestUsage,
  compacted: Compacted,
  finished: Finished,
  failed: Failed,
} as const;

/** The event that ends a chat turn's reply; nothing after it is part of the reply. */
export const REPLY_END = "chat_reply_end";

// The end marker always counts as the end, whatever its fields hold: a reply must stop there.
export const ReplyEnd = defineJobEvent(
  REPLY_END,
  z.object({
    error: z.string().optional().catch(undefined),
    detail: z.string().optional().catch(undefined),
    tests: z.string().optional().catch(undefined),
    pullRequestUrl: z.string().optional().catch(undefined),
    usage: z.unknown().transform(storedUsage),
    costUsd: z.number().default(0).catch(0),
    priceKnown: z.boolean().default(true).catch(true),
  }),
);

// The pipeline's and the queue's own events, shown by their name and message.

/** A step of the progress checklist. */
export const PipelineStep = defineJobEvent(
  "pipeline",
  z.object({ step: z.string(), message: z.string() }),
);

/** A setup command of the repository's settings, run in the new workspace. */
export const SetupCommand = defineJobEvent(
  "setup",
  z.object({ message: z.string(), output: z.string() }),
);

/** An MCP server of the job's started (its tools listed), or failed and was given up on. */
export const McpServerState = defineJobEvent(
  "mcp_server",
  z.object({
    server: z.string(),
    state: z.enum(["started", "failed"]),
    message: z.string(),
    durationMs: z.number(),
  }),
);

export const CiFailuresFound = defineJobEvent(
  "ci_failures",
  z.object({ sha: z.string(), failed: z.array(z.string()) }),
);

export const AttemptStarted = defineJobEvent("attempt_started", z.object({ attempt: z.number() }));

export const AttemptFailed = defineJobEvent(
  "attempt_failed",
  z.object({ attempt: z.number(), error: z.string() }),
);

/** The attempt delivers the agent run an earlier attempt of the job finished and kept (jobs/run/kept.ts). */
export const KeptRunTaken = defineJobEvent(
  "kept_run",
  z.object({ attempt: z.number(), message: z.string() }),
);

/** The model's second look at the job's diff before the pull request (jobs/run/second-look.ts). */
export const SecondLook = defineJobEvent("second_look", z.object({ message: z.string() }));

export const Cancelled = defineJobEvent("cancelled", z.object({}));

/** Out of retries; the error is the last attempt's, when it left one. */
export const Dead = defineJobEvent("dead", z.object({ error: z.string().nullable() }));

/** A stored row of this definition: its type and its data as read. */
const stored = <T extends string, S extends z.ZodObject>(event: JobEventDefinition<T, S>) =>
  z.object({ type: z.literal(event.type), data: event.data });

const Known = z.discriminatedUnion("type", [
  stored(StepStarted),
  stored(Text),
  stored(ToolCall),
  stored(ToolResult),
  // Stored before 2026-11-28, a request's usage was named `turn`.
  z.object({
    type: z.literal(RequestUsage.type),
    data: z.preprocess(
      (data) =>
        typeof data === "object" && data !== null && !("request" in data) && "turn" in data
          ? { ...data, request: data.turn }
          : data,
      RequestUsage.data,
    ),
  }),
  stored(Compacted),
  stored(Finished),
  stored(Failed),
  stored(ReplyEnd),
]);

/** Any other type (pipeline steps, attempts, refusals…), or a known one stored in another shape. */
const Other = z
  .object({ type: z.string(), data: z.record(z.string(), z.unknown()) })
  .transform(({ type, data: { message, ...rest } }) => ({
    type: "other" as const,
    name: type,
    message: typeof message === "string" ? message : undefined,
    // A message that is not text is shown with the rest.
    details: typeof message === "string" || message === undefined ? rest : { ...rest, message },
  }));

const StoredJobEvent = z.union([Known, Other]);
export type JobEventKind = z.infer<typeof StoredJobEvent>;

/** A stored event as its renderers read it. */
export function readJobEvent(event: { type: string; data: Record<string, unknown> }): JobEventKind {
  return StoredJobEvent.parse({ type: event.type, data: event.data });
}
