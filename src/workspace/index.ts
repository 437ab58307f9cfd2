// The workspace layer's public surface; import from here rather than from single files.
//
// Where one command runs, say the bash tool's `workspace.exec("npm test")` (every Workspace's
// `exec` means that: run a command in this workspace), on the default `sandbox` isolation:
//   1. factory.ts, createWorkspace: opened the workspace, the isolation (isolation.ts: the operator's
//      least, raised by vmpilot.yml) carried out by an engine: `local` → agent/local.ts, a VM engine
//      → vm/open.ts, isolation `none` → sandbox/host.ts.
//   2. agent/local.ts, exec (the local engine's; a VM holds its own limits): puts the job's
//      rlimits on the command's line and guards its disk use (sandbox/limit-guard.ts).
//   3. agent/remote.ts, exec: POSTs it to the workspace agent's /v1/exec, over a unix socket (on a
//      VM, over its private address; the same client and agent from here on).
//   4. agent/server.ts, runCommand: in the agent, which runs in the job's bubblewrap sandbox
//      (sandbox/sandbox.ts, openSandbox) or VM; resolves the cwd inside the checkout.
//   5. agent/warm-shell.ts, run: hands the command to a bash started ahead.
//   6. process/run.ts, runStarted: the timeout, the abort, the output captured and capped.
//   7. process/launcher.ts, launch: the bash, in a sandbox of its own (sandbox/bwrap.ts,
//      commandSandbox), in its own process group.

export { checkoutDiskMb, checkWorkspace, createWorkspace } from "./factory.ts";
export { type Checkout, prepareCheckout } from "./git/checkout.ts";
export { cleanRepoUrl } from "./git/git.ts";
export type { Engine, WorkspaceChoice } from "./isolation.ts";
export { SandboxUnavailableError } from "./sandbox/bwrap.ts";
export { type LimitEnforcement, limitEnforcement, type SandboxLimits } from "./sandbox/limits.ts";
export { mountScratchDisk, type ScratchDisk } from "./sandbox/scratch-disk.ts";
export { runSetup } from "./setup.ts";
export type * from "./types.ts";
export { VmFailed, VmRefused } from "./vm/engine.ts";
