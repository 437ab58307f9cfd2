// Sandbox isolation on the `local` engine: one bubblewrap sandbox for the whole job, with the workspace agent in it,
// which starts each command in a light sandbox of its own (bwrap.ts, commandSandbox) from a shell
// started ahead (warm-shell.ts). The agent runs as the sandbox's user, as its commands do: what
// keeps them apart is their own user and PID namespaces, not a uid. The job's limits hold as they
// do for a sandbox per command: the cgroup and the scratch disk are the sandbox's, and the worker
// guards every command. Commands reach the checkout only through the agent, exactly as they would
// on a Fly Machine or a Kubernetes pod, so every workspace contract runs against the agent for
// real.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { getCompileCacheDir } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { AGENT_DIR, SANDBOX_HOME, SANDBOX_ID } from "../sandbox/bwrap.ts";
import { type LimitGuard, spawnGuarded } from "../sandbox/limit-guard.ts";
import { type SandboxLimits, ulimitPrefix } from "../sandbox/limits.ts";
import { handOverWritten, UNPRIVILEGED_OWNER } from "../sandbox/owner.ts";
import { openSandbox, type SandboxWorkspaceOptions } from "../sandbox/sandbox.ts";
import { socketPathIn } from "../socket-path.ts";
import type { BlockedConnection, Workspace } from "../types.ts";
import { agentCodeCache } from "./code-cache.ts";
import { agentHealthy, createRemoteWorkspace } from "./remote.ts";

const SRC = fileURLToPath(new URL("../..", import.meta.url));
const PROJECT = fileURLToPath(new URL("../../..", import.meta.url));
const MAIN = join(SRC, "workspace", "agent", "main.ts");
/** What the agent needs of the project: its sources and zod; never the project's `.env`. */
const AGENT_FILES = [SRC, join(PROJECT, "node_modules", "zod"), join(PROJECT, "package.json")];
/** What the agent's compiled code depends on: its sources and zod's version. */
const AGENT_SOURCES = [SRC, join(PROJECT, "node_modules", "zod", "package.json")];
const FLAGS = process.features.typescript ? [] : ["--experimental-strip-types"];
const READY_MS = 15_000;
const DAY_MS = 24 * 3_600_000;

function quote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

export interface LocalAgent {
  /** Where the worker reaches the agent: a host path no command can see. */
  socketPath: string;
  /** The checkout, as the agent (and the sandbox) sees it. */
  root: string;
  stop(): Promise<void>;
  /** Settles when the agent process has ended, by itself or stopped. */
  exited: Promise<void>;
  blockedConnections(): readonly BlockedConnection[];
  /** Runs one of the job's commands under the sandbox's disk limit (limit-guard.ts). */
  guarded: LimitGuard;
  limits: SandboxLimits;
}

/**
 * Starts the workspace agent in a sandbox on `dir`, answering on a unix socket with `secret`.
 * Also what the Fly and Kubernetes API fakes run as their "machines".
 */
export async function startLocalAgent(
  dir: string,
  secret: string,
  options: SandboxWorkspaceOptions = {},
  /** More of the agent's own settings (agent/main.ts), as a VM's engine would pass them. */
  agentEnv: Record<string, string> = {},
): Promise<LocalAgent> {
  const stateDir = options.stateDir ?? (await mkdtemp(join(tmpdir(), "vmpilot-agent-")));
  const removeState = () =>
    options.stateDir ? Promise.resolve() : rm(stateDir, { recursive: true, force: true });
  // Beside the worker's own compile cache; none when that is off.
  const workerCache = getCompileCacheDir();
  const codeCache =
    workerCache &&
    (await agentCodeCache(dirname(workerCache), MAIN, AGENT_SOURCES, FLAGS, SANDBOX_ID));
  const sandbox = await openSandbox(dir, {
    ...options,
    stateDir,
    readOnlyPaths: [
      ...(options.readOnlyPaths ?? []),
      ...AGENT_FILES,
      ...(codeCache ? [codeCache] : []),
    ],
    agent: true,
  }).catch(async (error: unknown) => {
    await removeState();
    throw error;
  });
  const agentDir = sandbox.agentDir as string;
  // Read, then removed, by the agent; its directory is out of its commands' sight.
  const keyFile = join(agentDir, "agent.key");
  await writeFile(keyFile, secret, { mode: 0o600 });
  if (process.getuid?.() === 0) await handOverWritten(UNPRIVILEGED_OWNER, keyFile);
  const socket = await socketPathIn(agentDir, "agent.sock").catch(async (error: unknown) => {
    await sandbox.dispose();
    await removeState();
    throw error;
  });
  const socketPath = socket.path;
  const stop = new AbortController();
  const command = [process.execPath, ...FLAGS, MAIN].map(quote).join(" ");
  const agent = sandbox.run(`exec ${command}`, {
    env: {
      ...agentEnv,
      ...(codeCache && { NODE_COMPILE_CACHE: codeCache }),
      VMPILOT_AGENT_COMMAND_SANDBOX: "1",
      VMPILOT_AGENT_KEY_FILE: `${AGENT_DIR}/agent.key`,
      VMPILOT_AGENT_ROOT: sandbox.root,
      VMPILOT_AGENT_HOME: SANDBOX_HOME,
      VMPILOT_AGENT_LISTEN: `${AGENT_DIR}/agent.sock`,
    },
    timeoutMs: DAY_MS,
    signal: stop.signal,
  });
  let ended: string | undefined;
  void agent.then((result) => {
    ended = `${result.stderr.trim() || result.stdout.trim()} (exit ${result.exitCode})`;
  });
  const release = async () => {
    stop.abort();
    await agent.catch(() => undefined);
    await sandbox.dispose();
    await socket.remove();
    await removeState();
  };
  // Polled: the agent's "ready" line is only seen once its command ends.
  const deadline = Date.now() + READY_MS;
  while (!(await agentHealthy({ socketPath }))) {
    if (ended !== undefined || Date.now() > deadline) {
      await release();
      throw new Error(`the workspace agent did not start: ${ended ?? "no answer"}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return {
    socketPath,
    root: sandbox.root,
    stop: release,
    exited: agent.then(
      () => undefined,
      () => undefined,
    ),
    blockedConnections: () => sandbox.blockedConnections(),
    guarded: sandbox.guarded,
    limits: sandbox.limits,
  };
}

export async function createLocalAgentWorkspace(
  dir: string,
  options: SandboxWorkspaceOptions = {},
  /** The job's abort, which ends every call to the agent. */
  signal?: AbortSignal,
): Promise<Workspace> {
  const secret = randomBytes(32).toString("base64url");
  const agent = await startLocalAgent(dir, secret, options);
  const remote = createRemoteWorkspace({
    isolation: "sandbox",
    engine: "local",
    root: agent.root,
    endpoint: { socketPath: agent.socketPath },
    secret,
    release: agent.stop,
    blockedConnections: agent.blockedConnections,
    signal,
  });
  return {
    ...remote,
    // The rlimits on the command's own line, as the sandbox per command sets them.
    exec: (command, opts = {}) =>
      agent.guarded((stop, overDisk) =>
        remote.exec(ulimitPrefix(agent.limits, overDisk) + command, {
          ...opts,
          signal: opts.signal ? AbortSignal.any([stop, opts.signal]) : stop,
        }),
      ),
    spawn: (command, opts) =>
      spawnGuarded(agent.guarded, agent.limits, command, opts, remote.spawn),
  };
}
