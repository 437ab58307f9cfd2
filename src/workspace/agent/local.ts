// The `agent` provider: the workspace agent in a bubblewrap sandbox on this machine, standing in
// for a VM. Commands reach the checkout only through the agent, exactly as they would on a Fly
// Machine or a Kubernetes pod, so every workspace contract runs against the agent for real.
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { fallbackLogger } from "../../log/logger.ts";
import { SANDBOX_HOME } from "../sandbox/bwrap.ts";
import { UNPRIVILEGED_OWNER } from "../sandbox/owner.ts";
import { createSandboxWorkspace, type SandboxWorkspaceOptions } from "../sandbox/sandbox.ts";
import type { BlockedConnection, Workspace } from "../types.ts";
import { agentHealthy, createRemoteWorkspace } from "./remote.ts";

const SRC = fileURLToPath(new URL("../..", import.meta.url));
const PROJECT = fileURLToPath(new URL("../../..", import.meta.url));
const MAIN = join(SRC, "workspace", "agent", "main.ts");
/** What the agent needs of the project: its sources and zod; never the project's `.env`. */
const AGENT_FILES = [SRC, join(PROJECT, "node_modules", "zod"), join(PROJECT, "package.json")];
const READY_MS = 15_000;
const DAY_MS = 24 * 3_600_000;

function quote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

export interface LocalAgent {
  socketPath: string;
  /** The checkout, as the agent (and the sandbox) sees it. */
  root: string;
  stop(): Promise<void>;
  /** Settles when the agent process has ended, by itself or stopped. */
  exited: Promise<void>;
  blockedConnections(): readonly BlockedConnection[];
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
  await mkdir(join(stateDir, "tmp"), { recursive: true });
  // As root, the agent stays root (with CAP_SETUID, CAP_SETGID and CAP_KILL only) and runs its
  // commands as the user the sandbox hands the checkout to, as it does in a VM (agent/identity.ts).
  // Otherwise the sandbox has one uid only, which the agent shares with its commands, and says so.
  const supervisor = process.getuid?.() === 0;
  if (!supervisor) {
    (options.logger ?? fallbackLogger()).warn(
      "workspace provider 'agent' runs commands as the agent's own uid when the worker is not root: they can stop the agent",
    );
  }
  const sandbox = await createSandboxWorkspace(dir, {
    ...options,
    stateDir,
    readOnlyPaths: [...(options.readOnlyPaths ?? []), ...AGENT_FILES],
    supervisor,
  });
  // The sandbox's /tmp is this directory; the agent removes the key file once read.
  await writeFile(join(stateDir, "tmp", "vmpilot-agent.key"), secret, { mode: 0o600 });
  const { uid, gid } = UNPRIVILEGED_OWNER;
  const socketPath = join(stateDir, "tmp", "vmpilot-agent.sock");
  const stop = new AbortController();
  const flags = process.features.typescript ? "" : "--experimental-strip-types ";
  const agent = sandbox.exec(`exec ${quote(process.execPath)} ${flags}${quote(MAIN)}`, {
    env: {
      ...agentEnv,
      ...(supervisor ? { VMPILOT_AGENT_COMMAND_USER: `${uid}:${gid}` } : {}),
      VMPILOT_AGENT_KEY_FILE: "/tmp/vmpilot-agent.key",
      VMPILOT_AGENT_ROOT: sandbox.root,
      VMPILOT_AGENT_HOME: SANDBOX_HOME,
      VMPILOT_AGENT_LISTEN: "/tmp/vmpilot-agent.sock",
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
    if (!options.stateDir) await rm(stateDir, { recursive: true, force: true });
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
  return createRemoteWorkspace({
    provider: "agent",
    root: agent.root,
    endpoint: { socketPath: agent.socketPath },
    secret,
    release: agent.stop,
    blockedConnections: agent.blockedConnections,
    signal,
  });
}
