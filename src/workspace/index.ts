// The workspace layer's public surface; import from here rather than from single files.

export { checkWorkspace, createWorkspace } from "./factory.ts";
export { type Checkout, prepareCheckout } from "./git/checkout.ts";
export { cleanRepoUrl, type GitAuth } from "./git/git.ts";
export type { Engine, WorkspaceChoice } from "./isolation.ts";
export { SandboxUnavailableError } from "./sandbox/bwrap.ts";
export { type LimitEnforcement, limitEnforcement, type SandboxLimits } from "./sandbox/limits.ts";
export { runSetup, type SetupStep } from "./setup.ts";
export type * from "./types.ts";
export { VmFailed, VmRefused } from "./vm/engine.ts";
