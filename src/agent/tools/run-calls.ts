import type Anthropic from "@anthropic-ai/sdk";
import type { AgentEvent } from "../events.ts";
import { toolCallSpan } from "../spans.ts";
import type { AgentTool, ToolOutcome } from "./types.ts";

export interface ToolCallContext {
  tools: readonly AgentTool[];
  step: number;
  signal?: AbortSignal;
  remainingMs(): number;
  emit(event: AgentEvent): void;
  /**
   * Tool calls answered with this error instead of being run, by id: input the output limit cut
   * short, or arguments that were not valid JSON.
   */
  notRun?: ReadonlyMap<string, string>;
  /** Finds a called tool that is not in `tools` (an MCP server's). */
  find?(name: string): AgentTool | undefined;
}

/**
 * Runs the reply's tool calls one after another and returns their results, in order, then the
 * images they brought: the API takes images after the results, as content of the same turn.
 */
export async function runToolCalls(
  content: readonly Anthropic.ContentBlockParam[],
  context: ToolCallContext,
): Promise<Anthropic.ContentBlockParam[]> {
  const results: Anthropic.ToolResultBlockParam[] = [];
  const images: Anthropic.ContentBlockParam[] = [];
  for (const block of content) {
    if (block.type !== "tool_use") continue;
    const { id, name, input } = block;
    context.emit({ type: "tool_call", step: context.step, id, name, input });
    const started = Date.now();
    const refusal = context.notRun?.get(id);
    const outcome: ToolOutcome = refusal
      ? { content: refusal, isError: true }
      : await toolCallSpan(block, () => runOne(block, context));
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
    for (const [index, image] of (outcome.images ?? []).entries()) {
      images.push(
        { type: "text", text: `Image ${index + 1} of the result of ${name}:` },
        {
          type: "image",
          source: {
            type: "base64",
            media_type: image.mediaType,
            data: image.data.toString("base64"),
          },
        },
      );
    }
  }
  return [...results, ...images];
}

async function runOne(
  block: Anthropic.ToolUseBlockParam,
  context: ToolCallContext,
): Promise<ToolOutcome> {
  const tool = context.tools.find((t) => t.name === block.name) ?? context.find?.(block.name);
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
