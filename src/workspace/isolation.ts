// What a job's workspace must hold its commands to, as data, apart from the engine that carries it
// out (factory.ts). The isolation is the operator's least (WORKSPACE_ISOLATION), raised to what the
// repository's vmpilot.yml asks for, never lowered; `vm` runs on the operator's WORKSPACE_ENGINE.

import {
  DEFAULT_WORKSPACE,
  type Isolation,
  type SandboxLimits,
  type WorkspaceChoice,
} from "../config/workspace.ts";
import { PermanentError } from "../errors.ts";

export type { Engine, WorkspaceChoice } from "../config/workspace.ts";

/** Everything a workspace enforces, whichever engine runs it; the rest of its options say how. */
export interface IsolationPolicy {
  isolation: Isolation;
  /** Hosts commands may reach through the egress proxy (vmpilot.yml's network.allow). */
  allowHosts: readonly string[];
  /** Loopback/private ranges the proxy may reach anyway (NETWORK_ALLOW_PRIVATE). */
  allowPrivate: readonly string[];
  limits: SandboxLimits;
}

export class IsolationUnavailable extends PermanentError {
  override name = "IsolationUnavailable";
}

/** The workspace a job gets, within what the operator allows (default: DEFAULT_WORKSPACE). */
export function workspaceFor(
  operator: WorkspaceChoice | undefined,
  asked: "sandbox" | "vm",
): WorkspaceChoice {
  const allowed = operator ?? DEFAULT_WORKSPACE;
  // `sandbox` is every repository's default, no ask: the operator's choice stands (`none` only
  // in tests, as WORKSPACE_ISOLATION refuses it).
  const isolation = asked === "vm" ? asked : allowed.isolation;
  if (isolation !== "vm") return { isolation, engine: "local" };
  if (allowed.engine === "local") {
    throw new IsolationUnavailable(
      "this repository's vmpilot.yml asks for `isolation: vm`, and this vmpilot runs no VM workspaces (its operator can set WORKSPACE_ENGINE to fly or kubernetes)",
    );
  }
  return { isolation, engine: allowed.engine };
}
