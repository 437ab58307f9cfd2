// A job's workspace: the branch's checkout from the mirror cache, in a sandbox or on a VM, after
// the repository's setup commands.

import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { PermanentError } from "../../errors.ts";
import type { Logger } from "../../log/logger.ts";
import { workspaceErrors } from "../../metrics.ts";
import {
  type Checkout,
  createWorkspace,
  type GitAuth,
  prepareCheckout,
  runSetup,
  type SandboxLimits,
  SandboxUnavailableError,
  type SetupStep,
  VmFailed,
  VmRefused,
  type Workspace,
  type WorkspaceChoice,
} from "../../workspace/index.ts";
import type { VmPool } from "../../workspace/vm/pool.ts";

export interface JobWorkspace {
  workspace: Workspace;
  checkout: Checkout;
  /** The remote branch's commit the job continues, or null when the job creates the branch. */
  remoteSha: string | null;
  dispose(): Promise<void>;
}

export interface JobWorkspaceOptions {
  dataDir: string;
  workspace: WorkspaceChoice;
  jobId: number;
  attempt: number;
  /** The repository's clone URL from the webhook (any GitHub or Enterprise host). */
  cloneUrl: string;
  auth: GitAuth;
  branch: string;
  defaultBranch: string;
  allowHosts: readonly string[];
  allowPrivate: readonly string[];
  limits?: SandboxLimits;
  setup: readonly string[];
  /** Started VMs to take one from, for a VM provider. */
  pool?: VmPool;
  /** How many repositories keep a ready checkout for their next job; 0 keeps none. */
  spareCheckouts: number;
  signal: AbortSignal;
  logger: Logger;
  onSetupStep(step: SetupStep): void;
}

class SetupFailed extends PermanentError {
  override name = "SetupFailed";
}

/** Checks the branch out (continuing it when it exists), opens the sandbox and runs setup. */
export async function openJobWorkspace(options: JobWorkspaceOptions): Promise<JobWorkspace> {
  const dir = join(options.dataDir, "workspaces", `job-${options.jobId}-${options.attempt}`);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const remove = () => rm(dir, { recursive: true, force: true });
  let workspace: Workspace | undefined;
  try {
    const checkout = await prepareCheckout({
      dataDir: options.dataDir,
      repo: options.cloneUrl,
      auth: options.auth,
      dest: join(dir, "repo"),
      baseBranch: options.defaultBranch,
      branch: options.branch,
      existingBranch: "if-present",
      // A worker serves the same repositories again and again: the next job claims a ready tree.
      keepSpare: options.spareCheckouts > 0,
      spareLimit: options.spareCheckouts,
    });
    const spec = {
      ...options.workspace,
      root: checkout.root,
      dataDir: options.dataDir,
      // Named here so the sandbox never trusts the checkout's own (agent-writable) alternates file.
      mirror: checkout.mirror,
      allowPrivate: options.allowPrivate,
      limits: options.limits,
      logger: options.logger,
    };
    workspace = await createWorkspace({
      ...spec,
      allowHosts: [...options.allowHosts],
      owner: `job-${options.jobId}-${options.attempt}`,
      pool: options.pool,
      signal: options.signal,
    });
    const setup = await runSetup(workspace, options.setup, {
      signal: options.signal,
      onStep: options.onSetupStep,
    });
    if (!setup.ok) {
      const failed = setup.steps.at(-1);
      const tail = `${failed?.result.stderr ?? ""}\n${failed?.result.stdout ?? ""}`
        .trim()
        .slice(-500);
      const status = failed?.result.timedOut ? "timed out" : `exited ${failed?.result.exitCode}`;
      throw new SetupFailed(`setup command \`${failed?.command}\` ${status}: ${tail}`);
    }
    const ready = workspace;
    return {
      workspace: ready,
      checkout,
      remoteSha: checkout.continued ? checkout.baseSha : null,
      async dispose() {
        await ready.dispose();
        await remove();
      },
    };
  } catch (error) {
    workspaceErrors.inc({ kind: errorKind(error) });
    await workspace?.dispose();
    await remove();
    throw error;
  }
}

/** The metric's label: an operator alerts on an engine refusing (a quota, a bad token) apart. */
function errorKind(error: unknown): string {
  if (error instanceof SandboxUnavailableError) return "sandbox_unavailable";
  if (error instanceof VmRefused) return "vm_refused";
  if (error instanceof VmFailed) return "vm_failed";
  return error instanceof SetupFailed ? "setup_failed" : "open_failed";
}
