// Which provider a job gets: the operator's (WORKSPACE_PROVIDER), unless the repository asks for a
// VM and the operator's choice is not one. A repository can ask for more isolation, never less.

import type { ProviderName, VmProviderName } from "../config/workspace.ts";
import { PermanentError } from "../errors.ts";

export type { VmProviderName } from "../config/workspace.ts";

export class IsolationUnavailable extends PermanentError {
  override name = "IsolationUnavailable";
}

const isVm = (provider: ProviderName): provider is VmProviderName =>
  provider === "fly" || provider === "kubernetes";

export function providerFor(
  operator: ProviderName,
  asked: "sandbox" | "vm",
  /** WORKSPACE_VM_PROVIDER: the VM engine for repositories that ask for one. */
  vm: VmProviderName | undefined,
): ProviderName {
  if (asked === "sandbox" || isVm(operator)) return operator;
  if (vm === undefined) {
    throw new IsolationUnavailable(
      "this repository's vmpilot.yml asks for `isolation: vm`, and this vmpilot runs no VM workspaces (its operator can set WORKSPACE_VM_PROVIDER to fly or kubernetes)",
    );
  }
  return vm;
}
