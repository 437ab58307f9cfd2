// The loop's tools as Chat Completions functions. Anthropic's bash and text editor are built into
// its API; here they are declared with the same input schema, and the same code runs them.
import type OpenAI from "openai";
import { z } from "zod";
import type { AgentTool } from "../tools/types.ts";

type FunctionTool = OpenAI.Chat.Completions.ChatCompletionFunctionTool;

// Anthropic's built-in tools come with their own description; a function needs one.
const NATIVE: Record<string, string> = {
  bash:
    "Run a command with bash in the repository's workspace and get its output and exit status. " +
    "Each call is a fresh shell; only the working directory carries over. restart: true starts " +
    "over in the repository root.",
  str_replace_based_edit_tool:
    "View, create and edit files in the repository. view shows a file with line numbers (or a " +
    "directory's entries); create writes a new file; str_replace replaces old_str, which must " +
    "occur exactly once, with new_str; insert puts new_str after line insert_line (0: the top).",
};

/** The JSON schema of what the model may send: the tool's input schema, as input. */
function parameters(tool: AgentTool): Record<string, unknown> {
  const { $schema: _draft, ...schema } = z.toJSONSchema(tool.input, {
    io: "input",
    // An integer's safe range goes without saying.
    override: ({ jsonSchema }) => {
      if (jsonSchema.type !== "integer") return;
      delete jsonSchema.minimum;
      delete jsonSchema.maximum;
    },
  });
  return schema;
}

export function functionTools(tools: readonly AgentTool[]): FunctionTool[] {
  return tools.map((tool) => {
    const definition = tool.definition as { description?: string; input_schema?: unknown };
    const native = NATIVE[tool.name];
    if (native !== undefined && !definition.input_schema) {
      return {
        type: "function",
        function: { name: tool.name, description: native, parameters: parameters(tool) },
      };
    }
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
