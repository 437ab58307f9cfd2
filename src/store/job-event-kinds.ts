// What a job's session-log events hold, for everything that shows them (the job page and its live
// stream, the chat face's replies). A row is a type and free JSON, written by every version of the
// app since the table began, so it is parsed once where it is shown: a known type with the shape
// its renderers read, or an `other` event, shown by its name and message. An event stored with an
// odd shape falls back to `other` rather than breaking a page.
import { z } from "zod";

/** The event that ends a chat turn's reply; nothing after it is part of the reply. */
export const REPLY_END = "chat_reply_end";

const tokens = z.number().default(0);

/** A request's or a run's tokens and cost; a figure not stored counts as 0. */
const Usage = z.object({
  inputTokens: tokens,
  outputTokens: tokens,
  cacheReadInputTokens: tokens,
  cacheCreationInputTokens: tokens,
  costUsd: tokens,
});
export type StoredUsage = z.infer<typeof Usage>;

const NO_USAGE: StoredUsage = Usage.parse({});

/** Usage stored anywhere (an event, a job row), all zero when it is not usage at all. */
export function storedUsage(value: unknown): StoredUsage {
  return Usage.catch(NO_USAGE).parse(value ?? {});
}

const event = <T extends string, D extends z.ZodRawShape>(type: T, data: D) =>
  z.object({ type: z.literal(type), data: z.object(data) });

const Known = z.discriminatedUnion("type", [
  event("step_started", { step: z.number() }),
  event("text", { text: z.string() }),
  event("tool_call", { name: z.string(), input: z.unknown() }),
  event("tool_result", {
    name: z.string(),
    isError: z.boolean().default(false),
    /** What the model was sent. */
    output: z.string().default(""),
    /** Uncapped output, when it differs from `output`. */
    log: z.string().optional(),
    durationMs: z.number().optional(),
  }),
  event("usage", { turn: Usage.default(NO_USAGE), totals: Usage.default(NO_USAGE) }),
  event("compacted", {
    clearedToolResults: z.number(),
    summarizedMessages: z.number(),
    tokensBefore: z.number(),
    tokensAfter: z.number(),
  }),
  event("finished", {
    reason: z.string(),
    steps: z.number(),
    detail: z.string().optional(),
    finalText: z.string().optional(),
  }),
  event("failed", { code: z.string(), error: z.string() }),
  // The end marker always counts as the end, whatever its fields hold: a reply must stop there.
  event(REPLY_END, {
    error: z.string().optional().catch(undefined),
    detail: z.string().optional().catch(undefined),
    tests: z.string().optional().catch(undefined),
    pullRequestUrl: z.string().optional().catch(undefined),
    usage: z.unknown().transform(storedUsage),
    costUsd: z.number().default(0).catch(0),
    priceKnown: z.boolean().default(true).catch(true),
  }),
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

/** A call of the shell or the file editor as the renderers show it; other tools show their JSON. */
type ToolCallInput = z.infer<typeof BashInput> | z.infer<typeof EditorInput>;

const BashInput = z
  .object({ command: z.string().default(""), restart: z.boolean().default(false) })
  .transform((input) => ({ tool: "bash" as const, ...input }));

const path = z.string();
const EditorInput = z
  .discriminatedUnion("command", [
    z.object({ command: z.literal("view"), path }),
    z.object({ command: z.literal("create"), path, file_text: z.string() }),
    z.object({
      command: z.literal("str_replace"),
      path,
      old_str: z.string(),
      new_str: z.string().default(""),
    }),
    z
      .object({
        command: z.literal("insert"),
        path,
        insert_line: z.number(),
        // The model sends `insert_text`; older documentation called it `new_str`.
        insert_text: z.string().optional(),
        new_str: z.string().optional(),
      })
      .transform(({ insert_text, new_str, ...rest }) => ({
        ...rest,
        insert_text: insert_text ?? new_str ?? "",
      })),
    z.object({ command: z.literal("undo_edit"), path }),
  ])
  .transform((input) => ({ tool: "editor" as const, ...input }));

// The editor's name up to `text_editor_20250124`, in events stored back then.
const EDITOR_NAMES = new Set(["str_replace_based_edit_tool", "str_replace_editor"]);

/** The input of a shell or editor call, or undefined for another tool or an input of odd shape. */
export function toolCallInput(name: string, input: unknown): ToolCallInput | undefined {
  const schema = name === "bash" ? BashInput : EDITOR_NAMES.has(name) ? EditorInput : undefined;
  const parsed = schema?.safeParse(input);
  return parsed?.success ? parsed.data : undefined;
}
