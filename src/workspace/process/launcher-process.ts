// The process launcher: a small Node process that starts the worker's child processes on its
// behalf (see launcher.ts for why). It imports only Node built-ins, so it starts fast with Node's
// own type stripping and stays small: its own forks stay cheap.
import { type ChildProcess, spawn } from "node:child_process";
import { type LauncherReply, type LaunchSpec, specProblem } from "./launcher-protocol.ts";

const children = new Map<number, { child: ChildProcess; group: boolean }>();

function reply(message: LauncherReply): void {
  if (process.connected) process.send?.(message);
}

function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is already gone.
  }
}

/** A request that cannot be started fails alone: the launcher serves every job's commands. */
function start(id: number, spec: unknown): void {
  const problem = specProblem(spec);
  if (problem !== undefined) {
    reply({ type: "failed", id, code: "EINVAL", message: `Invalid launch request: ${problem}` });
    return;
  }
  if ((spec as LaunchSpec).user && (process.getuid?.() !== 0 || process.geteuid?.() !== 0)) {
    // Not root through and through (a launcher restarted by an agent that took the command user
    // as its effective uid): setuid would change the effective uid only, and leave the command a
    // real uid of root to take back.
    reply({ type: "failed", id, code: "EPERM", message: "Only root starts a process as a user" });
    return;
  }
  let child: ChildProcess;
  try {
    child = spawnSpec(spec as LaunchSpec);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    const message = error instanceof Error ? error.message : String(error);
    reply({ type: "failed", id, code: typeof code === "string" ? code : "EINVAL", message });
    return;
  }
  watch(id, spec as LaunchSpec, child);
}

function spawnSpec(spec: LaunchSpec): ChildProcess {
  return spawn(spec.file, spec.args, {
    cwd: spec.cwd,
    env: spec.env,
    detached: spec.group,
    uid: spec.user?.uid,
    gid: spec.user?.gid,
    stdio: [spec.input === undefined && !spec.inputLater ? "ignore" : "pipe", "pipe", "pipe"],
  });
}

function watch(id: number, spec: LaunchSpec, child: ChildProcess): void {
  let settled = false;
  children.set(id, { child, group: spec.group });
  child.stdin?.on("error", () => {
    // A process that exits without reading its input closes the pipe; its exit code tells.
  });
  if (!spec.inputLater) child.stdin?.end(spec.input);
  child.stdout?.on("data", (chunk: Buffer) => reply({ type: "output", id, stream: 1, chunk }));
  child.stderr?.on("data", (chunk: Buffer) => reply({ type: "output", id, stream: 2, chunk }));
  child.on("error", (error: NodeJS.ErrnoException) => {
    if (settled) return;
    settled = true;
    children.delete(id);
    reply({ type: "failed", id, code: error.code, message: error.message });
  });
  if (spec.group) {
    // Leftover background processes would hold the pipes open and keep running unseen.
    child.on("exit", () => killGroup(child.pid, "SIGKILL"));
  }
  child.on("close", (code, signal) => {
    if (settled) return;
    settled = true;
    children.delete(id);
    reply({ type: "exited", id, code, signal });
  });
}

process.on("message", (message: unknown) => {
  if (typeof message !== "object" || message === null) return;
  const { type, id, spec, signal, input } = message as Record<string, unknown>;
  // Without a numeric id there is nobody to answer; the worker never sends such a message.
  if (typeof id !== "number") return;
  if (type === "launch") return start(id, spec);
  const entry = children.get(id);
  if (!entry) return;
  if (type === "input") {
    // Only once, and only to a process started to wait for it (its stdin is still open).
    if (typeof input === "string" && entry.child.stdin?.writable) entry.child.stdin.end(input);
    return;
  }
  if (type !== "kill") return;
  try {
    if (entry.group) killGroup(entry.child.pid, signal as NodeJS.Signals);
    else entry.child.kill(signal as NodeJS.Signals);
  } catch {
    // An unknown signal name: nothing to send.
  }
});

// The worker is gone: nothing it started may outlive it.
process.on("disconnect", () => {
  for (const { child, group } of children.values()) {
    if (group) killGroup(child.pid, "SIGKILL");
    else child.kill("SIGKILL");
  }
  process.exit(0);
});
