// What a tool call does, for every place a person watches a run: the progress comment, the job
// page, the chat reply, the CLI. The input is the model's (or a stored event's, written by any
// version of the app), so it is parsed with the tool's own schema, not trusted.
import type { z } from "zod";
import { BashInput } from "./tools/bash.ts";
import { EditorInput } from "./tools/editor.ts";

const ACTIVITY_CAP = 200;

/** A call of the shell or the file editor; other tools show their JSON. */
type ToolCallInput =
  | ({ tool: "bash" } & z.output<typeof BashInput>)
  | ({ tool: "editor" } & z.output<typeof EditorInput>);

// The editor's name up to `text_editor_20250124`, in events stored back then.
const EDITOR_NAMES = new Set(["str_replace_based_edit_tool", "str_replace_editor"]);

/** The input of a shell or editor call, or undefined for another tool or an input of odd shape. */
export function toolCallInput(name: string, input: unknown): ToolCallInput | undefined {
  if (name === "bash") {
    const bash = BashInput.safeParse(input);
    return bash.success ? { tool: "bash", ...bash.data } : undefined;
  }
  if (!EDITOR_NAMES.has(name)) return undefined;
  const editor = EditorInput.safeParse(input);
  return editor.success ? { tool: "editor", ...editor.data } : undefined;
}

const firstLine = (value: string) => value.split("\n")[0]?.slice(0, ACTIVITY_CAP) ?? "";

// mcp__<server>__<tool>: a server's name holds no "__" (config/mcp.ts).
const MCP_TOOL = /^mcp__(.+?)__(.+)$/;

/** One line: the command, the edit, an MCP server's tool, or the tool's name. */
export function describeToolCall(name: string, input: unknown): string {
  const mcp = MCP_TOOL.exec(name);
  if (mcp) return `MCP ${mcp[1]}: ${mcp[2]}`;
  const call = toolCallInput(name, input);
  if (call?.tool === "bash") {
    return call.restart ? "bash: restart" : `$ ${firstLine(call.command ?? "")}`;
  }
  if (call?.tool === "editor") return `${call.command} ${firstLine(call.path)}`.trim();
  return name;
}
