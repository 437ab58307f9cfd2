// The providers that run a job's commands on this machine, for tests that hold both to the same
// isolation, leak, limit and kill contracts: a sandbox per command, and the workspace agent in one
// sandbox for the whole job.
import { createLocalAgentWorkspace } from "../../src/workspace/agent/local.ts";
import {
  createSandboxWorkspace,
  type SandboxWorkspaceOptions,
} from "../../src/workspace/sandbox/sandbox.ts";
import type { Workspace } from "../../src/workspace/types.ts";

export const LOCAL_PROVIDERS = ["sandbox", "agent"] as const;
export type LocalProvider = (typeof LOCAL_PROVIDERS)[number];

export function openWorkspace(
  provider: LocalProvider,
  dir: string,
  options: SandboxWorkspaceOptions = {},
): Promise<Workspace> {
  return provider === "agent"
    ? createLocalAgentWorkspace(dir, options)
    : createSandboxWorkspace(dir, options);
}
