// The process launcher: a small Node process that starts the worker's child processes on its
// behalf (see launcher.ts for why). It imports only Node built-ins, so it starts fast with Node's
// own type stripping and stays small: its own forks stay cheap.
import { type ChildProcess, spawn } from "node:child_process";
import type { LauncherReply, LauncherRequest } from "./launcher-protocol.ts";

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

function start(request: Extract<LauncherRequest, { type: "launch" }>): void {
  const { id, spec } = request;
  let settled = false;
  const child = spawn(spec.file, spec.args, {
    cwd: spec.cwd,
    env: spec.env,
    detached: spec.group,
    stdio: [spec.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
  });
  children.set(id, { child, group: spec.group });
  child.stdin?.on("error", () => {
    // A process that exits without reading its input closes the pipe; its exit code tells.
  });
  child.stdin?.end(spec.input);
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

process.on("message", (request: LauncherRequest) => {
  if (request.type === "launch") return start(request);
  const entry = children.get(request.id);
  if (!entry) return;
  if (entry.group) killGroup(entry.child.pid, request.signal);
  else entry.child.kill(request.signal);
});

// The worker is gone: nothing it started may outlive it.
process.on("disconnect", () => {
  for (const { child, group } of children.values()) {
    if (group) killGroup(child.pid, "SIGKILL");
    else child.kill("SIGKILL");
  }
  process.exit(0);
});
