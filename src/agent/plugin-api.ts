import type { JSONSchema } from "zod/v4/core";
import type { ExecResult } from "../workspace/types.ts";

/**
 * What a plugin's `tools.ts` and `context.ts` may use. Plugins import only types from here, so
 * nothing they load can reach the worker's secrets.
 */

interface ToolReply {
  content: string;
  isError?: boolean;
}

/** Read-only view of the workspace plus the run's report board. Worker handlers get only this. */
export interface WorkerCapabilities {
  readFile(path: string): Promise<string>;
  listDir(path: string): Promise<string[]>;
  /** Records a structured outcome (e.g. test status) in the run result under `key`. */
  report(key: string, value: unknown): void;
  signal?: AbortSignal;
}

/** Handlers that run in the workspace may also run commands there (inside the sandbox) and write. */
export interface WorkspaceCapabilities extends WorkerCapabilities {
  exec(command: string, options?: { timeoutMs?: number }): Promise<ExecResult>;
  writeFile(path: string, data: string): Promise<void>;
}

export type ToolInput = Record<string, unknown>;

interface ToolShape {
  name: string;
  description: string;
  /** What the model is sent; an input that does not fit it is answered without calling the handler. */
  input_schema: {
    type: "object";
    properties?: Record<string, JSONSchema.JSONSchema>;
    required?: string[];
  };
}

export interface WorkspaceTool extends ToolShape {
  runsIn: "workspace";
  handler(input: ToolInput, can: WorkspaceCapabilities): Promise<string | ToolReply>;
}

interface WorkerTool extends ToolShape {
  runsIn: "worker";
  handler(input: ToolInput, can: WorkerCapabilities): Promise<string | ToolReply>;
}

export type PluginTool = WorkspaceTool | WorkerTool;

/** What a finish check knows of the run besides its reports. */
interface RunFacts {
  /** False when the workspace is as the run found it, e.g. the model only answered a question. */
  changed: boolean;
}

/**
 * Called when the model ends its turn. Returns a message to send back when the plugin's
 * condition for "done" is not met yet, or undefined to let the run finish.
 */
export type FinishCheck = (
  reports: ReadonlyMap<string, unknown>,
  run: RunFacts,
) => string | undefined;

/** Reads a workspace file as text; undefined when it does not exist. */
export type ReadTextFile = (path: string) => Promise<string | undefined>;

/** Extra system-prompt text a plugin gathers from the workspace (e.g. the repo's own instructions). */
export type ContextHook = (readTextFile: ReadTextFile) => Promise<string | undefined>;
