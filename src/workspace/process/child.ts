// Starting one child process and following it to its end: what the process launcher does for the
// worker (launcher-process.ts), and what a small process that may fork cheaply does for itself
// (launcher.ts, launchHere). Only Node built-ins: the launcher starts fast with type stripping.
import { type ChildProcess, spawn } from "node:child_process";
import type { LaunchSpec } from "./launcher-protocol.ts";

export interface ChildEvents {
  output(stream: 1 | 2, chunk: Buffer): void;
  /** The process itself exited; output may still come from what it left holding its pipes. */
  ended(): void;
  /** Once the process exited and its output ended. */
  exited(code: number | null, signal: NodeJS.Signals | null): void;
  /** It could not be started; nothing else follows. */
  failed(code: string | undefined, message: string): void;
}

export interface Child {
  /** Signals the process (its whole group when started with `group`). */
  kill(signal: NodeJS.Signals): void;
  /** The input of a process started with `inputLater`, once (stdin is then closed), or `stream`. */
  write(input: string): void;
}

function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is already gone.
  }
}

/** Starts `spec` (already checked with specProblem); events report what becomes of it. */
export function startChild(spec: LaunchSpec, events: ChildEvents): Child {
  let child: ChildProcess;
  try {
    child = spawn(spec.file, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      detached: spec.group,
      uid: spec.user?.uid,
      gid: spec.user?.gid,
      stdio: [
        spec.input === undefined && !spec.inputLater && !spec.stream ? "ignore" : "pipe",
        "pipe",
        "pipe",
      ],
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    const message = error instanceof Error ? error.message : String(error);
    events.failed(typeof code === "string" ? code : "EINVAL", message);
    return { kill() {}, write() {} };
  }
  let settled = false;
  child.stdin?.on("error", () => {
    // A process that exits without reading its input closes the pipe; its exit code tells.
  });
  if (!spec.inputLater && !spec.stream) child.stdin?.end(spec.input);
  child.stdout?.on("data", (chunk: Buffer) => events.output(1, chunk));
  child.stderr?.on("data", (chunk: Buffer) => events.output(2, chunk));
  child.on("error", (error: NodeJS.ErrnoException) => {
    if (settled) return;
    settled = true;
    events.failed(error.code, error.message);
  });
  child.on("exit", () => {
    // Leftover background processes would hold the pipes open and keep running unseen.
    if (spec.group) killGroup(child.pid, "SIGKILL");
    events.ended();
  });
  child.on("close", (code, signal) => {
    if (settled) return;
    settled = true;
    events.exited(code, signal);
  });
  return {
    kill(signal) {
      try {
        if (spec.group) killGroup(child.pid, signal);
        else child.kill(signal);
      } catch {
        // An unknown signal name: nothing to send.
      }
    },
    write(input) {
      // Only to a process started to wait for it (its stdin is still open): once, unless streamed.
      if (!child.stdin?.writable) return;
      if (spec.stream) child.stdin.write(input);
      else child.stdin.end(input);
    },
  };
}
