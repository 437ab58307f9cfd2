import { SandboxUnavailableError } from "./bwrap.ts";
import { createHostWorkspace } from "./host.ts";
import type { WorkspaceLogger } from "./logger.ts";
import { createSandboxWorkspace, type SandboxWorkspaceOptions } from "./sandbox.ts";
import type { ProviderName, Workspace } from "./types.ts";

export interface CreateWorkspaceOptions extends Omit<SandboxWorkspaceOptions, "logger"> {
  /** Default "sandbox". "host" must be asked for: it has no isolation. */
  provider?: ProviderName;
  /** The checkout directory. */
  root: string;
  logger?: WorkspaceLogger;
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
  return createSandboxWorkspace(root, { ...sandboxOptions, logger });
}
