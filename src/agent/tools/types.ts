import type Anthropic from "@anthropic-ai/sdk";

/** What one tool call sends back to the model. */
export interface ToolOutcome {
  content: string;
  isError: boolean;
  /** Uncapped output for the job log, when the model got a shortened version. */
  log?: string;
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
  run(input: unknown, context: ToolRunContext): Promise<ToolOutcome>;
}

export function toolError(content: string): ToolOutcome {
  return { content, isError: true };
}
