// `vmpilot run --json`: one JSON object per line on stdout for scripts, each with a `type`.
import type { AgentEvent } from "../agent/events.ts";
import { toolCallInput } from "../agent/tool-call.ts";
import type { ProgressOutput } from "./progress.ts";

/** What a tool call is, for a script: a command, an edit, or another tool (or an input of odd shape). */
function callObject(event: Extract<AgentEvent, { type: "tool_call" }>): Record<string, unknown> {
  const call = toolCallInput(event.name, event.input);
  if (call?.tool === "bash") {
    return { type: "command", step: event.step, command: call.command ?? null };
  }
  if (call?.tool === "editor") {
    return { type: "edit", step: event.step, command: call.command, path: call.path };
  }
  return { type: "tool", step: event.step, name: event.name, input: event.input };
}

function eventObject(event: AgentEvent): Record<string, unknown> | undefined {
  switch (event.type) {
    case "step_started":
      return { type: "step", step: event.step };
    case "text":
      return { type: "text", step: event.step, text: event.text };
    case "tool_call":
      return callObject(event);
    case "tool_result":
      return {
        type: "output",
        step: event.step,
        name: event.name,
        isError: event.isError,
        output: event.output,
      };
    case "usage":
      return { type: "usage", step: event.step, request: event.request, totals: event.totals };
    default:
      // compaction, finished and failed are summed up by the final `result` line.
      return undefined;
  }
}

export function createJsonPrinter(out: ProgressOutput) {
  const line = (value: Record<string, unknown>) => out.write(`${JSON.stringify(value)}\n`);
  return {
    onEvent(event: AgentEvent): void {
      const value = eventObject(event);
      if (value) line(value);
    },
    result(value: Record<string, unknown>): void {
      line({ type: "result", ...value });
    },
  };
}
