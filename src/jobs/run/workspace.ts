// The one way a job opens its workspace: the repository's branch checked out from the mirror
// cache (continuing the branch when it exists), or an empty repository of the worker's making for a
// scratch conversation; then the sandbox or VM the repository's isolation asks for, with its
// network allow-list and the worker's limits; then the repository's setup commands, each logged as
// the job's progress.
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { RepoSettings } from "../../config/repo-config.ts";
import { PermanentError } from "../../errors.ts";
import { annotate, inSpan } from "../../log/trace.ts";
import { workspaceErrors } from "../../metrics.ts";
import { SetupCommand } from "../../store/job-event-kinds.ts";
import { gitClient } from "../../workspace/git/git.ts";
import { SPARE_REPOSITORIES } from "../../workspace/git/spares.ts";
import {
  type Checkout,
  checkoutDiskMb,
  createWorkspace,
  mountScratchDisk,
  prepareCheckout,
  runSetup,
  SandboxUnavailableError,
  type ScratchDisk,
  VmFailed,
  VmRefused,
  type Workspace,
} from "../../workspace/index.ts";
import { workspaceFor } from "../../workspace/isolation.ts";
import type { JobDeps, Run } from "./deps.ts";
import type { JobProgress } from "./progress.ts";

/** The repository's branch a job works on. */
export interface CheckoutSpec {
  /** The repository's clone URL from the webhook (any GitHub or Enterprise host). */
  cloneUrl: string;
  installationId: number;
  branch: string;
  /** What a new branch starts from; default the remote's HEAD. */
  baseBranch?: string;
  /** Runs the repository's setup commands; false skips them. */
  setup: boolean;
  /** Starts `branch` at this pull request's head (a fork's), fetched by the worker. */
  pullRequest?: number;
}

export type WorkspaceSpec = CheckoutSpec | { scratch: true };

export interface JobWorkspace<C extends Checkout | null = Checkout> {
  workspace: Workspace;
  /** The repository's checkout; null for scratch. */
  checkout: C;
  /** The remote branch's commit the job continues, or null when the job creates the branch. */
  remoteSha: string | null;
  /**
   * What delivery publishes the commits since: the checkout's base, or, when the branch already
   * holds the work of the run an earlier attempt kept, the commit that run began from (kept.ts).
   */
  from: C extends Checkout ? string : null;
  dispose(): Promise<void>;
}

class SetupFailed extends PermanentError {
  override name = "SetupFailed";
}

/** How the runner hands a kind the one way to its workspace. */
export interface OpenWorkspace {
  (spec: CheckoutSpec): Promise<JobWorkspace>;
  (spec: WorkspaceSpec): Promise<JobWorkspace<Checkout | null>>;
}

type Settings = Pick<RepoSettings, "isolation" | "network" | "setup">;
type Progress = Pick<JobProgress, "log">;

export function openWorkspace(
  deps: JobDeps,
  run: Run,
  settings: Settings,
  spec: CheckoutSpec,
  progress: Progress,
): Promise<JobWorkspace>;
export function openWorkspace(
  deps: JobDeps,
  run: Run,
  settings: Settings,
  spec: WorkspaceSpec,
  progress: Progress,
): Promise<JobWorkspace<Checkout | null>>;
export function openWorkspace(...args: Parameters<typeof open>) {
  return inSpan("workspace open", {}, () => open(...args));
}

async function open(
  deps: JobDeps,
  run: Run,
  settings: Settings,
  spec: WorkspaceSpec,
  progress: Progress,
): Promise<JobWorkspace<Checkout | null>> {
  // Before the token: a repository asking for an isolation this worker lacks needs none.
  const choice = workspaceFor(deps.workspace, settings.isolation);
  annotate({
    "vmpilot.workspace.isolation": choice.isolation,
    "vmpilot.workspace.engine": choice.engine,
  });
  const owner = `job-${run.jobId}-${run.attempt}`;
  const dir = join(deps.dataDir, "workspaces", owner);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const root = join(dir, "repo");
  let disk: ScratchDisk | undefined;
  const remove = async () => {
    await disk?.unmount();
    await rm(dir, { recursive: true, force: true });
  };
  let workspace: Workspace | undefined;
  try {
    // The kernel holds the checkout to the disk limit: it is made on the job's disk.
    const diskMb = await checkoutDiskMb(choice, deps.sandboxLimits);
    let checkout: Checkout | null;
    if ("scratch" in spec) {
      if (diskMb !== undefined) disk = await mountScratchDisk(dir, diskMb);
      checkout = await scratch(root);
    } else {
      checkout = await inSpan("git checkout", {}, () => checkOut(deps, spec, root, diskMb));
      disk = checkout.disk;
    }
    workspace = await createWorkspace({
      ...choice,
      root,
      dataDir: deps.dataDir,
      // Named here so the sandbox never trusts the checkout's own (agent-writable) alternates file.
      mirror: checkout?.mirror,
      allowHosts: [...settings.network.allow],
      allowPrivate: deps.allowPrivate ?? [],
      limits: deps.sandboxLimits,
      ...(disk && { disk, stateDir: join(dir, "state") }),
      logger: deps.logger,
      owner,
      pool: deps.vmPool,
      signal: run.signal,
    });
    const ready = workspace;
    if (!("scratch" in spec) && spec.setup) {
      const setup = { attributes: { "vmpilot.setup.commands": settings.setup.length } };
      await inSpan("workspace setup", setup, () => setUp(ready, settings.setup, run, progress));
    }
    return {
      workspace: ready,
      checkout,
      remoteSha: checkout?.continued ? checkout.baseSha : null,
      from: checkout?.baseSha ?? null,
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

/** An empty repository of the worker's making. */
async function scratch(root: string): Promise<null> {
  await mkdir(root, { recursive: true });
  await gitClient(root).raw(["init", "-q", "-b", "main"]);
  return null;
}

async function checkOut(
  deps: JobDeps,
  spec: CheckoutSpec,
  dest: string,
  diskMb: number | undefined,
): Promise<Checkout> {
  const spares = deps.spareCheckouts ?? SPARE_REPOSITORIES;
  return prepareCheckout({
    dataDir: deps.dataDir,
    repo: spec.cloneUrl,
    auth: { token: await deps.installationToken(spec.installationId) },
    dest,
    ...(spec.baseBranch !== undefined && { baseBranch: spec.baseBranch }),
    branch: spec.branch,
    existingBranch: "if-present",
    ...(spec.pullRequest !== undefined && { pullRequest: spec.pullRequest }),
    // A worker serves the same repositories again and again: the next job claims a ready tree.
    keepSpare: spares > 0,
    spareLimit: spares,
    ...(diskMb !== undefined && { diskMb }),
  });
}

async function setUp(
  workspace: Workspace,
  commands: readonly string[],
  run: Run,
  progress: Progress,
): Promise<void> {
  const setup = await runSetup(workspace, commands, {
    signal: run.signal,
    onStep: (step) =>
      progress.log(SetupCommand, {
        message: `\`${step.command}\` exited ${step.result.exitCode}`,
        output: `${step.result.fullStdout}\n${step.result.fullStderr}`.slice(-20_000),
      }),
  });
  if (setup.ok) return;
  const failed = setup.steps.at(-1);
  const tail = `${failed?.result.stderr ?? ""}\n${failed?.result.stdout ?? ""}`.trim().slice(-500);
  const status = failed?.result.timedOut ? "timed out" : `exited ${failed?.result.exitCode}`;
  throw new SetupFailed(`setup command \`${failed?.command}\` ${status}: ${tail}`);
}

/** The metric's label: an operator alerts on an engine refusing (a quota, a bad token) apart. */
function errorKind(error: unknown): string {
  if (error instanceof SandboxUnavailableError) return "sandbox_unavailable";
  if (error instanceof VmRefused) return "vm_refused";
  if (error instanceof VmFailed) return "vm_failed";
  return error instanceof SetupFailed ? "setup_failed" : "open_failed";
}
