import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type Child, startChild } from "./child.ts";
import {
  type LauncherReply,
  type LauncherRequest,
  type LaunchSpec,
  specProblem,
} from "./launcher-protocol.ts";

export type { LaunchSpec } from "./launcher-protocol.ts";

/**
 * Every git and sandbox process of the worker is started by a small launcher process rather than
 * by the worker itself. libuv starts a child with fork(), which copies the parent's page tables:
 * measured here, one spawn blocks the event loop ~1.5 ms from a 50 MB process but ~20 ms from a
 * 300 MB one, and a busy worker is the latter. From a thread the copy still stalls the process,
 * so it runs in a process of its own.
 */

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Launched {
  /** Settles once the process exited and all its output was delivered. */
  done: Promise<Exit>;
  /**
   * Resolves once the process itself exited, which may be well before `done`: a process that left
   * its group may hold the output's pipes. Never, for one that could not start.
   */
  ended: Promise<void>;
  /** Signals the process (its whole group when launched with `group`). */
  kill(signal?: NodeJS.Signals): void;
  /**
   * Writes the input of a process launched with `inputLater`, and closes its stdin; or, launched
   * with `stream`, writes to its stdin.
   */
  write(input: string): void;
}

export type OutputHandler = (stream: "stdout" | "stderr", chunk: Buffer) => void;

/**
 * A process that could not be started (missing program, bad cwd, a NUL byte in an argument);
 * `code` is the errno code, EINVAL for a request that can never start.
 */
export class LaunchError extends Error {
  override name = "LaunchError";
  readonly code: string | undefined;
  constructor(message: string, code: string | undefined) {
    super(message);
    this.code = code;
  }
}

/** A spec that can never start, such as one with a NUL byte: another attempt would repeat it. */
export class InvalidLaunch extends LaunchError {
  override name = "InvalidLaunch";
  /** Another attempt would send the same request (see src/errors.ts). */
  readonly permanent = true;
  constructor(message: string) {
    super(message, "EINVAL");
  }
}

interface Pending {
  onOutput?: OutputHandler;
  onEnded(): void;
  resolve(exit: Exit): void;
  reject(error: Error): void;
}

interface Launcher {
  process: ChildProcess;
  pending: Map<number, Pending>;
}

const ENTRY = fileURLToPath(new URL("./launcher-process.ts", import.meta.url));
let current: Launcher | undefined;
let nextId = 1;

function startLauncher(): Launcher {
  const child = fork(ENTRY, [], {
    // Node strips the entry's types itself; older 22.x lines need the flag.
    execArgv: process.features.typescript ? [] : ["--experimental-strip-types"],
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    serialization: "advanced",
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const launcher: Launcher = { process: child, pending: new Map() };
  child.on("message", (reply: LauncherReply) => {
    const pending = launcher.pending.get(reply.id);
    if (!pending) return;
    if (reply.type === "output") {
      const chunk = Buffer.from(reply.chunk.buffer, reply.chunk.byteOffset, reply.chunk.length);
      pending.onOutput?.(reply.stream === 1 ? "stdout" : "stderr", chunk);
      return;
    }
    if (reply.type === "ended") {
      pending.onEnded();
      return;
    }
    settle(launcher, reply.id);
    if (reply.type === "exited") pending.resolve({ code: reply.code, signal: reply.signal });
    else pending.reject(new LaunchError(reply.message, reply.code));
  });
  child.on("exit", (code, signal) => {
    if (current === launcher) current = undefined;
    const error = new Error(`the process launcher exited (${signal ?? `code ${code}`})`);
    for (const pending of launcher.pending.values()) pending.reject(error);
    launcher.pending.clear();
  });
  return launcher;
}

/** An idle launcher must not keep the worker (or a CLI run) alive. */
function settle(launcher: Launcher, id: number): void {
  launcher.pending.delete(id);
  if (launcher.pending.size === 0) {
    launcher.process.unref();
    launcher.process.channel?.unref();
  }
}

function send(launcher: Launcher, request: LauncherRequest): void {
  launcher.process.send(request);
}

/** Set by launchHere: this process starts its children itself. */
let here = false;

/**
 * From now on, this process starts its children itself, saving the hop through the launcher: for
 * a process as small as the launcher, which never changes its own user (the workspace agent with
 * its commands in sandboxes of their own).
 */
export function launchHere(): void {
  here = true;
}

function launchDirectly(spec: LaunchSpec, onOutput?: OutputHandler): Launched {
  let child: Child | undefined;
  let ended = false;
  let onEnded = () => {};
  const exited = new Promise<void>((resolve) => {
    onEnded = resolve;
  });
  const done = new Promise<Exit>((resolve, reject) => {
    child = startChild(spec, {
      output: (stream, chunk) => onOutput?.(stream === 1 ? "stdout" : "stderr", chunk),
      ended: () => onEnded(),
      exited(code, signal) {
        ended = true;
        resolve({ code, signal });
      },
      failed(code, message) {
        ended = true;
        reject(new LaunchError(message, code));
      },
    });
  });
  return {
    done,
    ended: exited,
    kill: (signal = "SIGKILL") => {
      if (!ended) child?.kill(signal);
    },
    write: (input) => {
      if (!ended) child?.write(input);
    },
  };
}

/**
 * Starts a process through the launcher; its output arrives through `onOutput`. Throws an
 * InvalidLaunch at once for a spec that can never start, such as one with a NUL byte.
 */
export function launch(spec: LaunchSpec, onOutput?: OutputHandler): Launched {
  const problem = specProblem(spec);
  if (problem !== undefined)
    throw new InvalidLaunch(`Cannot start ${JSON.stringify(spec.file)}: ${problem}`);
  if (here) return launchDirectly(spec, onOutput);
  current ??= startLauncher();
  const launcher = current;
  const id = nextId++;
  let onEnded = () => {};
  const ended = new Promise<void>((resolve) => {
    onEnded = resolve;
  });
  const done = new Promise<Exit>((resolve, reject) => {
    launcher.pending.set(id, { onOutput, onEnded, resolve, reject });
  });
  launcher.process.ref();
  launcher.process.channel?.ref();
  send(launcher, { type: "launch", id, spec });
  return {
    done,
    ended,
    kill(signal = "SIGKILL") {
      if (launcher.pending.has(id)) send(launcher, { type: "kill", id, signal });
    },
    write(input) {
      if (launcher.pending.has(id)) send(launcher, { type: "input", id, input });
    },
  };
}

/**
 * Launches a process and collects its output; for short commands such as git's. Past
 * `maxStdoutBytes` the process is killed and its output `cut` there, as the bytes arrive.
 */
export async function launchAndCollect(
  spec: LaunchSpec,
  maxStdoutBytes = Number.POSITIVE_INFINITY,
): Promise<Exit & { stdout: string; stderr: string; cut: boolean }> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let size = 0;
  let cut = false;
  const launched = launch(spec, (stream, chunk) => {
    if (stream === "stderr") err.push(chunk);
    else if (!cut) {
      out.push(chunk.subarray(0, maxStdoutBytes - size));
      size += chunk.length;
      cut = size > maxStdoutBytes;
      if (cut) launched.kill();
    }
  });
  const exit = await launched.done;
  const stdout = Buffer.concat(out).toString();
  return { ...exit, stdout, stderr: Buffer.concat(err).toString(), cut };
}
