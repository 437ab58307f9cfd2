// The agent's spans, named and described as OpenTelemetry's GenAI semantic conventions say: each
// model request (`chat <model>`), each tool call (`execute_tool <tool>`), and the run around them
// (`invoke_agent`), with vmpilot's cost beside the token counts. A tool call's span says how long
// its command was and how it exited; its text and output only when the operator asks
// (VMPILOT_TRACE_TOOL_CONTENT), and redacted then like everything the spans carry.
import type Anthropic from "@anthropic-ai/sdk";
import type { Attributes, Span } from "@opentelemetry/api";
import { inSpan, SpanKind, toolContentTraced } from "../log/trace.ts";
import type { ModelReply } from "./providers/types.ts";
import type { ToolOutcome } from "./tools/types.ts";
import { promptTokens, type UsageTotals } from "./usage.ts";

/** What a span holds of a tool call's input or output, at most, when content is traced. */
const CONTENT_CAP = 4096;

export interface ModelRequestSpan {
  /** The provider's name: anthropic, or the OpenAI-compatible provider's (openai, ollama, ...). */
  provider: string;
  model: string;
  maxTokens: number;
}

interface Priced {
  reply: ModelReply;
  /** The reply's usage with its cost. */
  usage: UsageTotals;
}

/** Runs one model request in its span. */
export function modelRequestSpan(
  request: ModelRequestSpan,
  call: () => Promise<Priced>,
): Promise<Priced> {
  const attributes = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": request.provider,
    // The attribute's name before gen_ai.provider.name, which backends still group by.
    "gen_ai.system": request.provider,
    "gen_ai.request.model": request.model,
    "gen_ai.request.max_tokens": request.maxTokens,
  };
  return inSpan(`chat ${request.model}`, { kind: SpanKind.CLIENT, attributes }, async (span) => {
    const priced = await call();
    span.setAttributes({
      ...usageAttributes(priced.usage),
      "gen_ai.response.finish_reasons": [priced.reply.stopReason],
    });
    return priced;
  });
}

/** Token counts as the conventions count them: input includes what the cache served or stored. */
function usageAttributes(usage: UsageTotals): Attributes {
  return {
    "gen_ai.usage.input_tokens": promptTokens(usage),
    "gen_ai.usage.output_tokens": usage.outputTokens,
    "gen_ai.usage.cache_read.input_tokens": usage.cacheReadInputTokens,
    "gen_ai.usage.cache_creation.input_tokens": usage.cacheCreationInputTokens,
    "vmpilot.cost_usd": usage.costUsd,
  };
}

/** Runs one tool call in its span. */
export function toolCallSpan(
  call: Anthropic.ToolUseBlockParam,
  run: () => Promise<ToolOutcome>,
): Promise<ToolOutcome> {
  const attributes = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": call.name,
    "gen_ai.tool.call.id": call.id,
  };
  return inSpan(`execute_tool ${call.name}`, { attributes }, async (span) => {
    const outcome = await run();
    describeOutcome(span, call, outcome);
    return outcome;
  });
}

function describeOutcome(span: Span, call: Anthropic.ToolUseBlockParam, outcome: ToolOutcome) {
  if (!span.isRecording()) return;
  const exec = outcome.exec;
  if (exec) {
    span.setAttribute("vmpilot.tool.command.length", exec.command.length);
    if (exec.exitCode !== null) span.setAttribute("process.exit.code", exec.exitCode);
  }
  if (outcome.isError) span.setAttribute("error.type", "tool_error");
  if (!toolContentTraced()) return;
  span.setAttributes({
    "gen_ai.tool.call.arguments": JSON.stringify(call.input ?? {}).slice(0, CONTENT_CAP),
    "gen_ai.tool.call.result": outcome.content.slice(0, CONTENT_CAP),
  });
}

/** Runs an agent run (its model requests and tool calls inside) in its span. */
export function agentRunSpan<R extends { usage: UsageTotals; steps: number; reason: string }>(
  agent: { model: string; mode: string },
  run: () => Promise<R>,
): Promise<R> {
  const attributes = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "vmpilot",
    "gen_ai.request.model": agent.model,
    "vmpilot.agent.mode": agent.mode,
  };
  return inSpan("invoke_agent vmpilot", { attributes }, async (span) => {
    const result = await run();
    span.setAttributes({
      ...usageAttributes(result.usage),
      "vmpilot.agent.steps": result.steps,
      "vmpilot.agent.finish_reason": result.reason,
    });
    return result;
  });
}
