import { z } from "zod";
import { DEFAULT_TIMEOUT_MS } from "../../workspace/process/run.ts";
import type { Workspace } from "../../workspace/types.ts";
import type { PluginTool, WorkerCapabilities, WorkspaceCapabilities } from "../plugin-api.ts";
import { type AgentTool, defineTool, type ToolOutcome, type ToolRunContext } from "./types.ts";

/** Plugins read source and reports from the checkout; anything bigger is refused unread. */
const PLUGIN_READ_MAX_BYTES = 5_000_000;

/**
 * Wraps a plugin's tool so the loop can offer and run it, handing it only the capabilities its kind
 * allows. The plugin declares its input as JSON schema, which is what the model is sent; an input
 * that does not fit it is answered without calling the handler.
 */
export function pluginAgentTool(
  tool: PluginTool,
  workspace: Workspace,
  reports: Map<string, unknown>,
): AgentTool {
  const workerCapabilities = (context: ToolRunContext): WorkerCapabilities => ({
    readFile: async (path) =>
      (await workspace.readFile(path, PLUGIN_READ_MAX_BYTES)).toString("utf8"),
    listDir: (path) => workspace.listDir(path),
    report: (key, value) => {
      reports.set(key, value);
    },
    signal: context.signal,
  });

  return defineTool({
    name: tool.name,
    definition: { name: tool.name, description: tool.description, input_schema: tool.input_schema },
    input: z.fromJSONSchema(tool.input_schema).pipe(z.record(z.string(), z.unknown())),
    async execute(args, context) {
      let exec: ToolOutcome["exec"];
      const ran = (command: string, exitCode: number | null) => {
        exec = { command, exitCode };
      };
      try {
        const reply =
          tool.runsIn === "workspace"
            ? await tool.handler(
                args,
                workspaceCapabilities(workspace, workerCapabilities(context), context, ran),
              )
            : await tool.handler(args, workerCapabilities(context));
        const outcome =
          typeof reply === "string"
            ? { content: reply, isError: false }
            : { content: reply.content, isError: reply.isError ?? false };
        return exec ? { ...outcome, exec } : outcome;
      } catch (error) {
        return {
          content: `${tool.name} failed: ${error instanceof Error ? error.message : String(error)}`,
          isError: true,
        };
      }
    },
  });
}

function workspaceCapabilities(
  workspace: Workspace,
  base: WorkerCapabilities,
  context: ToolRunContext,
  /** Told each command run, for the tool call's span. */
  ran: (command: string, exitCode: number | null) => void,
): WorkspaceCapabilities {
  return {
    ...base,
    exec: async (command, options = {}) => {
      const result = await workspace.exec(command, {
        timeoutMs: Math.min(options.timeoutMs ?? DEFAULT_TIMEOUT_MS, context.remainingMs),
        signal: context.signal,
      });
      ran(command, result.exitCode);
      return result;
    },
    writeFile: (path, data) => workspace.writeFile(path, data),
  };
}
