import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_LIMITS, DEFAULT_WORKSPACE, mismatch } from "../config/workspace.ts";
import { fallbackLogger, type Logger } from "../log/logger.ts";
import { createLocalAgentWorkspace } from "./agent/local.ts";
import type { Deadline } from "./agent/remote.ts";
import type { Engine, IsolationPolicy, WorkspaceChoice } from "./isolation.ts";
import { SandboxUnavailableError } from "./sandbox/bwrap.ts";
import { createHostWorkspace } from "./sandbox/host.ts";
import { kernelSupport, type SandboxLimits } from "./sandbox/limits.ts";
import type { SandboxWorkspaceOptions } from "./sandbox/sandbox.ts";
import type { Workspace } from "./types.ts";
import type { VmEngine } from "./vm/engine.ts";
import { createVmWorkspace } from "./vm/open.ts";
import type { VmPool } from "./vm/pool.ts";
import { egressFor, engineFor } from "./vm/settings.ts";

export interface CreateWorkspaceOptions
  extends Partial<IsolationPolicy>,
    Omit<SandboxWorkspaceOptions, "logger" | keyof IsolationPolicy> {
  /** Default DEFAULT_WORKSPACE's; `vm` needs a VM engine, and a VM engine runs `vm` only. */
  engine?: Engine;
  /** The checkout directory; a VM engine sends it to the VM and works on the VM's copy. */
  root: string;
  logger?: Logger;
  /** For a VM engine: who the VM is for (`job-<id>-<attempt>`), for the sweeper. */
  owner?: string;
  /** For a VM engine; default: the one the environment configures (vm/settings.ts). */
  vmEngine?: VmEngine;
  /** For a VM engine; default WORKSPACE_PROXY_HOST (vm/settings.ts). */
  egressHost?: string;
  /** Started VMs; used when they are this engine's. */
  pool?: VmPool;
  signal?: AbortSignal;
  /** For a VM engine: of each call to the VM's agent; default AbortSignal.timeout. */
  deadline?: Deadline;
}

/** A VM made outside a job (the CLI): the sweeper leaves it alone; the CLI destroys it. */
const sessionOwner = () => `cli-${process.pid}`;

/**
 * Opens a workspace on a checkout: the engine carries out the isolation policy, and never gives
 * less than asked. `none` must be asked for: it runs commands on this machine as they are.
 */
export async function createWorkspace(options: CreateWorkspaceOptions): Promise<Workspace> {
  const {
    isolation = DEFAULT_WORKSPACE.isolation,
    engine = DEFAULT_WORKSPACE.engine,
    root,
    logger,
    owner,
    vmEngine,
    signal,
    egressHost,
    pool,
    deadline,
    ...sandboxOptions
  } = options;
  const unfit = mismatch({ isolation, engine });
  if (unfit) throw new SandboxUnavailableError(unfit);
  if (engine !== "local") {
    const route = egressHost ? { host: egressHost } : egressFor(engine);
    return createVmWorkspace({
      engine: vmEngine ?? engineFor(engine),
      localRoot: root,
      owner: owner ?? sessionOwner(),
      pool: pool?.engine === engine ? pool : undefined,
      signal,
      deadline,
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
  if (isolation === "none") return createHostWorkspace(root, { logger });
  if (process.platform !== "linux") {
    throw new SandboxUnavailableError(
      `sandbox isolation needs Linux and bubblewrap (this is ${process.platform}); choose isolation none explicitly for trusted local use`,
    );
  }
  return createLocalAgentWorkspace(root, { ...sandboxOptions, logger }, signal);
}

/**
 * The size of the disk a job's checkout is made on (prepareCheckout's diskMb), when its workspace
 * will be a sandbox on this machine and the host can mount one: the kernel then holds the checkout,
 * /tmp and HOME together to the disk limit (sandbox.ts, `disk`). Undefined otherwise: a VM holds
 * its own disk, and where none can be mounted (not root, no loop devices) the checkout is measured
 * (limit-guard.ts).
 */
export async function checkoutDiskMb(
  choice: WorkspaceChoice,
  limits: SandboxLimits = DEFAULT_LIMITS,
): Promise<number | undefined> {
  if (choice.engine !== "local" || choice.isolation !== "sandbox") return undefined;
  const { scratchProblem } = await kernelSupport();
  return scratchProblem === undefined ? limits.diskMb : undefined;
}

/**
 * Opens and closes a workspace of this isolation and engine on an empty directory, so a worker
 * finds out at startup, not job by job, that it cannot run any. Throws SandboxUnavailableError
 * naming the fix.
 */
export async function checkWorkspace(
  choice: WorkspaceChoice,
  options: Omit<CreateWorkspaceOptions, keyof WorkspaceChoice | "root"> = {},
): Promise<void> {
  if (choice.engine !== "local") {
    // Listing proves the settings, the token and the app or namespace without making a VM.
    const engine = options.vmEngine ?? engineFor(choice.engine);
    await engine.list().catch((error: Error) => {
      throw new SandboxUnavailableError(
        `the ${choice.engine} workspaces cannot be used: ${error.message}`,
      );
    });
    return;
  }
  const root = await mkdtemp(join(tmpdir(), "vmpilot-check-"));
  try {
    const workspace = await createWorkspace({ ...options, ...choice, root });
    await workspace.dispose();
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
