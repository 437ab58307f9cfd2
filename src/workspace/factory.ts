import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fallbackLogger, type Logger } from "../log/logger.ts";
import { createLocalAgentWorkspace } from "./agent/local.ts";
import { SandboxUnavailableError } from "./sandbox/bwrap.ts";
import { createHostWorkspace } from "./sandbox/host.ts";
import { createSandboxWorkspace, type SandboxWorkspaceOptions } from "./sandbox/sandbox.ts";
import type { ProviderName, Workspace } from "./types.ts";
import type { VmEngine } from "./vm/engine.ts";
import { createVmWorkspace } from "./vm/open.ts";
import type { VmPool } from "./vm/pool.ts";
import { egressFor, engineFor } from "./vm/settings.ts";

export interface CreateWorkspaceOptions extends Omit<SandboxWorkspaceOptions, "logger"> {
  /** Default "agent". "host" must be asked for: it has no isolation. */
  provider?: ProviderName;
  /** The checkout directory; a VM provider sends it to the VM and works on the VM's copy. */
  root: string;
  logger?: Logger;
  /** For a VM provider: who the VM is for (`job-<id>-<attempt>`), for the sweeper. */
  owner?: string;
  /** For a VM provider; default: the engine the environment configures. */
  engine?: VmEngine;
  /** For a VM provider; default WORKSPACE_PROXY_HOST (vm/settings.ts). */
  egressHost?: string;
  /** Started VMs; used when it is this provider's. */
  pool?: VmPool;
  signal?: AbortSignal;
}

/** A VM made outside a job (the CLI): the sweeper leaves it alone; the session destroys it. */
const sessionOwner = () => `cli-${process.pid}`;

/** Opens a workspace on a checkout with the chosen provider; never downgrades isolation on its own. */
export async function createWorkspace(options: CreateWorkspaceOptions): Promise<Workspace> {
  const {
    provider = "agent",
    root,
    logger,
    owner,
    engine,
    signal,
    egressHost,
    pool,
    ...sandboxOptions
  } = options;
  if (provider === "host") {
    return createHostWorkspace(root, { logger });
  }
  if (provider === "fly" || provider === "kubernetes") {
    const route = egressHost ? { host: egressHost } : egressFor(provider);
    return createVmWorkspace({
      engine: engine ?? engineFor(provider),
      localRoot: root,
      owner: owner ?? sessionOwner(),
      pool: pool?.provider === provider ? pool : undefined,
      signal,
      egress: route
        ? {
            ...route,
            allowHosts: sandboxOptions.allowHosts ?? [],
            allowPrivate: sandboxOptions.allowPrivate ?? [],
            logger: logger ?? fallbackLogger(),
          }
        : undefined,
    });
  }
  if (process.platform !== "linux") {
    throw new SandboxUnavailableError(
      `the sandbox provider needs Linux and bubblewrap (this is ${process.platform}); choose provider "host" explicitly for trusted local use`,
    );
  }
  if (provider === "agent") {
    return createLocalAgentWorkspace(root, { ...sandboxOptions, logger }, signal);
  }
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
  if (provider === "fly" || provider === "kubernetes") {
    // Listing proves the settings, the token and the app or namespace without making a VM.
    const engine = options.engine ?? engineFor(provider);
    await engine.list().catch((error: Error) => {
      throw new SandboxUnavailableError(
        `the ${provider} workspaces cannot be used: ${error.message}`,
      );
    });
    return;
  }
  const root = await mkdtemp(join(tmpdir(), "vmpilot-check-"));
  try {
    const workspace = await createWorkspace({ ...options, provider, root });
    await workspace.dispose();
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
