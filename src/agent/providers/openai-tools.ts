// The loop's tools as Chat Completions functions. Anthropic's bash and text editor are built into
// its API; here they are declared with the same input schema, and the same code runs them.
import type OpenAI from "openai";
import type { AgentTool } from "../tools/types.ts";

type FunctionTool = OpenAI.Chat.Completions.ChatCompletionFunctionTool;

const NATIVE: Record<string, FunctionTool["function"]> = {
  bash: {
    name: "bash",
    description:
      "Run a command with bash in the repository's workspace and get its output and exit status. " +
      "Each call is a fresh shell; only the working directory carries over. restart: true starts " +
      "over in the repository root.",
    parameters: {
      type: "object",
      properties: {
        command: { type: "string", description: "The command to run." },
        restart: { type: "boolean", description: "Start over in the repository root." },
      },
    },
  },
  str_replace_based_edit_tool: {
    name: "str_replace_based_edit_tool",
    description:
      "View, create and edit files in the repository. view shows a file with line numbers (or a " +
      "directory's entries); create writes a new file; str_replace replaces old_str, which must " +
      "occur exactly once, with new_str; insert puts new_str after line insert_line (0: the top).",
    parameters: {
      type: "object",
      properties: {
        command: { type: "string", enum: ["view", "create", "str_replace", "insert"] },
        path: { type: "string", description: "Relative to the repository root." },
        file_text: { type: "string", description: "create: the whole file." },
        old_str: { type: "string", description: "str_replace: the text to replace." },
        new_str: { type: "string", description: "str_replace and insert: the new text." },
        insert_line: { type: "integer", description: "insert: the line to insert after." },
        view_range: {
          type: "array",
          items: { type: "integer" },
          description: "view: [first, last] line; -1 as last means the end.",
        },
      },
      required: ["command", "path"],
    },
  },
};

export function functionTools(tools: readonly AgentTool[]): FunctionTool[] {
  return tools.map((tool) => {
    const definition = tool.definition as { description?: string; input_schema?: unknown };
    const native = NATIVE[tool.name];
    if (native && !definition.input_schema) return { type: "function", function: native };
    return {
      type: "function",
      function: {
        name: tool.name,
        description: definition.description ?? "",
        parameters: (definition.input_schema ?? { type: "object" }) as Record<string, unknown>,
      },
    };
  });
}
