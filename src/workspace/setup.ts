import type { BlockedConnection, ExecResult, Workspace } from "./types.ts";

/** Installs can take a while; a setup command gets longer than an agent's command. */
const SETUP_TIMEOUT_MS = 10 * 60_000;

interface SetupStep {
  command: string;
  result: ExecResult;
}

export interface SetupReport {
  /** True when every command exited 0. */
  ok: boolean;
  /** One entry per command run; running stops at the first failure. */
  steps: SetupStep[];
  /** Hosts the setup commands tried to reach outside the allow-list. */
  blocked: BlockedConnection[];
}

export interface SetupOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Called after each command, for progress output and the job log. */
  onStep?: (step: SetupStep) => void;
}

/**
 * Runs a repository's setup commands (e.g. `npm ci`) before the agent starts, in the job's own
 * workspace: on a VM, what setup installs must be where the agent's commands run.
 */
export async function runSetup(
  ws: Workspace,
  commands: readonly string[],
  options: SetupOptions = {},
): Promise<SetupReport> {
  const steps: SetupStep[] = [];
  for (const command of commands) {
    const result = await ws.exec(command, {
      timeoutMs: options.timeoutMs ?? SETUP_TIMEOUT_MS,
      signal: options.signal,
    });
    const step = { command, result };
    steps.push(step);
    options.onStep?.(step);
    if (result.exitCode !== 0) return { ok: false, steps, blocked: [...ws.blockedConnections()] };
  }
  return { ok: true, steps, blocked: [...ws.blockedConnections()] };
}
