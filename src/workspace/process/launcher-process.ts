// The process launcher: a small Node process that starts the worker's child processes on its
// behalf (see launcher.ts for why). It imports only Node built-ins, so it starts fast with Node's
// own type stripping and stays small: its own forks stay cheap.
import { type Child, startChild } from "./child.ts";
import { type LauncherReply, type LaunchSpec, specProblem } from "./launcher-protocol.ts";

const children = new Map<number, Child>();

function reply(message: LauncherReply): void {
  if (process.connected) process.send?.(message);
}

/** A request that cannot be started fails alone: the launcher serves every job's commands. */
function start(id: number, spec: unknown): void {
  const problem = specProblem(spec);
  if (problem !== undefined) {
    reply({ type: "failed", id, code: "EINVAL", message: `Invalid launch request: ${problem}` });
    return;
  }
  if ((spec as LaunchSpec).user && (process.getuid?.() !== 0 || process.geteuid?.() !== 0)) {
    // Not root through and through (a launcher restarted by a workspace agent that took the command
    // user as its effective uid): setuid would change the effective uid only, and leave the command
    // a real uid of root to take back.
    reply({ type: "failed", id, code: "EPERM", message: "Only root starts a process as a user" });
    return;
  }
  let ended = false;
  const end = (message: LauncherReply) => {
    ended = true;
    children.delete(id);
    reply(message);
  };
  const child = startChild(spec as LaunchSpec, {
    output: (stream, chunk) => reply({ type: "output", id, stream, chunk }),
    ended: () => reply({ type: "ended", id }),
    exited: (code, signal) => end({ type: "exited", id, code, signal }),
    failed: (code, message) => end({ type: "failed", id, code, message }),
  });
  // One that could not start has ended already.
  if (!ended) children.set(id, child);
}

process.on("message", (message: unknown) => {
  if (typeof message !== "object" || message === null) return;
  const { type, id, spec, signal, input } = message as Record<string, unknown>;
  // Without a numeric id there is nobody to answer; the worker never sends such a message.
  if (typeof id !== "number") return;
  if (type === "launch") return start(id, spec);
  const child = children.get(id);
  if (!child) return;
  if (type === "input" && typeof input === "string") child.write(input);
  if (type === "kill") child.kill(signal as NodeJS.Signals);
});

// The worker is gone: nothing it started may outlive it.
process.on("disconnect", () => {
  for (const child of children.values()) child.kill("SIGKILL");
  process.exit(0);
});
