// The workspace layer's public surface; import from here rather than from single files.
export { SandboxUnavailableError } from "./bwrap.ts";
export { type Checkout, prepareCheckout } from "./checkout.ts";
export { checkProvider, createWorkspace } from "./factory.ts";
export { cleanRepoUrl, type GitAuth } from "./git.ts";
export { type LimitEnforcement, limitEnforcement, type SandboxLimits } from "./limits.ts";
export { runSetup, type SetupStep } from "./setup.ts";
export type * from "./types.ts";
export { VmFailed, VmRefused } from "./vm/engine.ts";
