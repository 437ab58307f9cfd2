import type { Workspace } from "../../workspace/types.ts";
import type { Plugin } from "../plugins.ts";
import { type BashToolOptions, bashTool } from "./bash.ts";
import { type EditorOptions, editorTool } from "./editor.ts";
import { pluginAgentTool } from "./plugin-tool.ts";
import type { AgentTool } from "./types.ts";

export interface ToolsetOptions {
  workspace: Workspace;
  plugins: readonly Plugin[];
  /** Names of the tools the run may use; default: the native tools plus every enabled plugin's. */
  allow?: readonly string[];
  bash?: BashToolOptions;
  editor?: EditorOptions;
  /** Where plugin tools record their reports. */
  reports: Map<string, unknown>;
}

/** The tools one run offers, in a stable order so the cached prompt prefix stays the same. */
export function buildToolset(options: ToolsetOptions): AgentTool[] {
  const all: AgentTool[] = [
    bashTool(options.workspace, options.bash),
    editorTool(options.workspace, options.editor),
    ...options.plugins.flatMap((p) =>
      p.tools.map((t) => pluginAgentTool(t, options.workspace, options.reports)),
    ),
  ];
  if (!options.allow) return all;
  const unknown = options.allow.filter((name) => !all.some((t) => t.name === name));
  if (unknown.length > 0) {
    throw new Error(
      `Tool allow-list names ${unknown.join(", ")}, which no enabled plugin provides (available: ${all.map((t) => t.name).join(", ")})`,
    );
  }
  return all.filter((t) => options.allow?.includes(t.name));
}
