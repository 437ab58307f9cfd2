import type Anthropic from "@anthropic-ai/sdk";
import type { AgentEvent } from "../events.ts";
import type { AgentTool, ToolOutcome } from "./types.ts";

export interface ToolCallContext {
  tools: readonly AgentTool[];
  step: number;
  signal?: AbortSignal;
  remainingMs(): number;
  emit(event: AgentEvent): void;
  /** A tool call whose input the output limit cut short: answered with an error, not run. */
  cutOff?: { id: string; limit: string };
}

/** Runs the reply's tool calls one after another and returns their results, in order. */
export async function runToolCalls(
  content: readonly Anthropic.ContentBlock[],
  context: ToolCallContext,
): Promise<Anthropic.ToolResultBlockParam[]> {
  const results: Anthropic.ToolResultBlockParam[] = [];
  for (const block of content) {
    if (block.type !== "tool_use") continue;
    const { id, name, input } = block;
    context.emit({ type: "tool_call", step: context.step, id, name, input });
    const started = Date.now();
    const outcome =
      id === context.cutOff?.id
        ? {
            content: `This tool call was cut off by ${context.cutOff.limit} before its input was complete, so it was not run. Send it again with a smaller input (for example, write a large file in several steps).`,
            isError: true,
          }
        : await runOne(block, context);
    context.emit({
      type: "tool_result",
      step: context.step,
      id,
      name,
      isError: outcome.isError,
      output: outcome.content,
      ...(outcome.log !== undefined && { log: outcome.log }),
      durationMs: Date.now() - started,
    });
    results.push({
      type: "tool_result",
      tool_use_id: id,
      content: outcome.content,
      ...(outcome.isError && { is_error: true }),
    });
  }
  return results;
}

async function runOne(
  block: Anthropic.ToolUseBlock,
  context: ToolCallContext,
): Promise<ToolOutcome> {
  const tool = context.tools.find((t) => t.name === block.name);
  if (!tool) return { content: `Unknown tool ${block.name}.`, isError: true };
  const remainingMs = context.remainingMs();
  if (context.signal?.aborted || remainingMs <= 0) {
    return { content: "Not run: the run was stopped (cancelled or out of time).", isError: true };
  }
  try {
    return await tool.run(block.input, { signal: context.signal, remainingMs });
  } catch (error) {
    return {
      content: `${block.name} failed: ${error instanceof Error ? error.message : String(error)}`,
      isError: true,
    };
  }
}
