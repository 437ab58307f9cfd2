import { spawn } from "node:child_process";
import { performance } from "node:perf_hooks";
import { capStreams, MODEL_OUTPUT_CAP, OutputCapture } from "./output.ts";
import type { ExecResult } from "./types.ts";

export const DEFAULT_TIMEOUT_MS = 120_000;

/** A fully resolved process to start: no shell lookup, no inherited environment. */
export interface ProcessSpec {
  file: string;
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
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
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(spec.file, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const stdout = new OutputCapture();
    const stderr = new OutputCapture();
    let timedOut = false;
    let exit: { code: number | null } | undefined;

    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // The group is already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, timeoutMs);
    const onAbort = () => killGroup();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    if (options.signal?.aborted) killGroup();

    const cleanup = () => {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
    };

    child.stdout.on("data", (chunk: Buffer) => stdout.write(chunk));
    child.stderr.on("data", (chunk: Buffer) => stderr.write(chunk));
    child.on("error", (error) => {
      cleanup();
      reject(error);
    });
    child.on("exit", (code) => {
      exit = { code };
      // Leftover background processes would hold the pipes open and keep running unseen.
      killGroup();
    });
    child.on("close", () => {
      cleanup();
      const fullStdout = stdout.text();
      const fullStderr = stderr.text();
      const capped = capStreams(fullStdout, fullStderr, options.modelCap ?? MODEL_OUTPUT_CAP);
      resolve({
        stdout: capped.stdout,
        stderr: capped.stderr,
        exitCode: exit?.code ?? null,
        timedOut,
        truncated: capped.truncated,
        fullStdout,
        fullStderr,
        durationMs: performance.now() - started,
      });
    });
  });
}
