import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../github/logger.ts";
import { createLocalAgentWorkspace } from "./agent-local.ts";
import { SandboxUnavailableError } from "./bwrap.ts";
import { createHostWorkspace } from "./host.ts";
import { createSandboxWorkspace, type SandboxWorkspaceOptions } from "./sandbox.ts";
import type { ProviderName, Workspace } from "./types.ts";

export interface CreateWorkspaceOptions extends Omit<SandboxWorkspaceOptions, "logger"> {
  /** Default "sandbox". "host" must be asked for: it has no isolation. */
  provider?: ProviderName;
  /** The checkout directory. */
  root: string;
  logger?: Logger;
}

/** Opens a workspace on a checkout with the chosen provider; never downgrades isolation on its own. */
export async function createWorkspace(options: CreateWorkspaceOptions): Promise<Workspace> {
  const { provider = "sandbox", root, logger, ...sandboxOptions } = options;
  if (provider === "host") {
    return createHostWorkspace(root, { logger });
  }
  if (process.platform !== "linux") {
    throw new SandboxUnavailableError(
      `the sandbox provider needs Linux and bubblewrap (this is ${process.platform}); choose provider "host" explicitly for trusted local use`,
    );
  }
  if (provider === "agent") return createLocalAgentWorkspace(root, { ...sandboxOptions, logger });
  return createSandboxWorkspace(root, { ...sandboxOptions, logger });
}

/**
 * Opens and closes a workspace of the provider on an empty directory, so a worker finds out at
 * startup, not job by job, that it cannot run any. Throws SandboxUnavailableError naming the fix.
 */
export async function checkProvider(
  provider: ProviderName,
  options: Omit<CreateWorkspaceOptions, "provider" | "root"> = {},
): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), "vmpilot-check-"));
  try {
    const workspace = await createWorkspace({ ...options, provider, root });
    await workspace.dispose();
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
