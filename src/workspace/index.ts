// The workspace layer's public surface; import from here rather than from single files.
export { SandboxUnavailableError } from "./bwrap.ts";
export { type Checkout, type CheckoutOptions, createBranch, prepareCheckout } from "./checkout.ts";
export { DEFAULT_TIMEOUT_MS } from "./exec.ts";
export { type CreateWorkspaceOptions, checkProvider, createWorkspace } from "./factory.ts";
export { cleanRepoUrl, type GitAuth, validateBranchName } from "./git.ts";
export { createHostWorkspace } from "./host.ts";
export { type Mirror, syncMirror } from "./mirror.ts";
export { capText, MODEL_OUTPUT_CAP } from "./output.ts";
export { PathEscapeError, resolveInside } from "./paths.ts";
export { createSandboxWorkspace, type SandboxWorkspaceOptions } from "./sandbox.ts";
export { runSetup, type SetupOptions, type SetupReport, type SetupStep } from "./setup.ts";
export { sparesSettled } from "./spares.ts";
export type * from "./types.ts";
