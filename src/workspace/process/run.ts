import { performance } from "node:perf_hooks";
import type { ExecResult } from "../types.ts";
import {
  type Exit,
  type Launched,
  type LaunchSpec,
  launch,
  type OutputHandler,
} from "./launcher.ts";
import { capStreams, MODEL_OUTPUT_CAP, OutputCapture } from "./output.ts";

export const DEFAULT_TIMEOUT_MS = 120_000;

/** A fully resolved process to start: no shell lookup, no inherited environment. */
export interface ProcessSpec {
  file: string;
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
  user?: LaunchSpec["user"];
}

export interface RunOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Characters of stdout + stderr the model gets; default 30,000. */
  modelCap?: number;
}

/**
 * Runs a process in its own process group and kills the whole group on timeout, on abort, and
 * when the leader exits — so background children never outlive the command that started them.
 */
export function runProcess(spec: ProcessSpec, options: RunOptions = {}): Promise<ExecResult> {
  return runStarted((onOutput) => launch({ ...spec, group: true }, onOutput), options);
}

/** Like runProcess, for a process `start` launches (or sets going) in its own process group. */
export async function runStarted(
  start: (onOutput: OutputHandler) => Launched,
  options: RunOptions = {},
): Promise<ExecResult> {
  const started = performance.now();
  const stdout = new OutputCapture();
  const stderr = new OutputCapture();
  const child = start((stream, chunk) => (stream === "stdout" ? stdout : stderr).write(chunk));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill();
  }, options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const onAbort = () => child.kill();
  options.signal?.addEventListener("abort", onAbort, { once: true });
  if (options.signal?.aborted) child.kill();
  let exit: Exit;
  try {
    exit = await child.done;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener("abort", onAbort);
  }
  const fullStdout = stdout.text();
  const fullStderr = stderr.text();
  const capped = capStreams(fullStdout, fullStderr, options.modelCap ?? MODEL_OUTPUT_CAP);
  return {
    stdout: capped.stdout,
    stderr: capped.stderr,
    exitCode: exit.code,
    timedOut,
    truncated: capped.truncated,
    fullStdout,
    fullStderr,
    durationMs: performance.now() - started,
  };
}
