import type Anthropic from "@anthropic-ai/sdk";
import type { z } from "zod";
import type { FetchedImage } from "../../github/images.ts";

/** What one tool call sends back to the model. */
export interface ToolOutcome {
  content: string;
  isError: boolean;
  /** Uncapped output for the job log, when the model got a shortened version. */
  log?: string;
  /** The command the call ran in the workspace, if any (the last, for a tool running several). */
  exec?: { command: string; exitCode: number | null };
  /** Images the model is shown after the results (checked: a PNG, JPEG, GIF or WebP). */
  images?: FetchedImage[];
}

export interface ToolRunContext {
  signal?: AbortSignal;
  /** Time left before the run's wall-time limit; tools must not run longer. */
  remainingMs: number;
}

/** A tool the loop offers the model and knows how to run. */
export interface AgentTool {
  name: string;
  definition: Anthropic.ToolUnion;
  /** What the tool takes; providers that need a JSON schema for it derive one from this. */
  input: z.ZodType;
  /** Runs the model's input, or answers why it does not fit `input` without running anything. */
  run(input: unknown, context: ToolRunContext): Promise<ToolOutcome>;
}

/** Tools that come as a run goes (an MCP server's, once it started): mcp/open.ts. */
export interface ToolSource {
  /** The tools to offer in the next request, in a stable order. */
  offered(): Promise<AgentTool[]>;
  /** A tool the model called by a name of this source's, offered or not; else undefined. */
  find(name: string): AgentTool | undefined;
}

interface ToolDefinition<S extends z.ZodType> {
  name: string;
  definition: Anthropic.ToolUnion;
  input: S;
  execute(input: z.output<S>, context: ToolRunContext): Promise<ToolOutcome>;
}

/** A tool whose input is parsed with its schema before it runs. */
export function defineTool<S extends z.ZodType>(tool: ToolDefinition<S>): AgentTool {
  return {
    name: tool.name,
    definition: tool.definition,
    input: tool.input,
    async run(raw, context) {
      const parsed = tool.input.safeParse(withoutNulls(raw ?? {}));
      if (!parsed.success) return toolError(inputError(parsed.error));
      return tool.execute(parsed.data, context);
    },
  };
}

/**
 * Models told a field is optional often send it as null (strict function calling asks for every
 * field); null is taken as left out.
 */
function withoutNulls(input: unknown): unknown {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return input;
  return Object.fromEntries(Object.entries(input).filter(([, value]) => value !== null));
}

/** Each field the model got wrong, by its path, so it can correct the call. */
function inputError(error: z.ZodError): string {
  const issues = error.issues.map((issue) => {
    const path = issue.path.map(String).join(".");
    return path ? `${path}: ${issue.message}` : issue.message;
  });
  return `Invalid input, so nothing was run. ${issues.join("; ")}.`;
}

export function toolError(content: string): ToolOutcome {
  return { content, isError: true };
}
