import { launchAndCollect } from "./launcher.ts";
import type { ExecResult } from "./types.ts";

/**
 * What one sandbox may use. Processes, memory and file size are rlimits set in the command's
 * shell, so they hold for everything it starts; disk is measured while commands run.
 */
export interface SandboxLimits {
  /** Processes and threads of the sandbox user (RLIMIT_NPROC). As root every job shares that
   * user; otherwise the worker's own processes count too. */
  processes: number;
  /** Memory one process may allocate (RLIMIT_DATA), in MB. */
  memoryMb: number;
  /** Largest file a command may write (RLIMIT_FSIZE), in MB. */
  fileMb: number;
  /** The checkout, /tmp and HOME together, in MB. */
  diskMb: number;
}

export const DEFAULT_LIMITS: SandboxLimits = {
  processes: 1024,
  memoryMb: 8192,
  fileMb: 2048,
  diskMb: 20_480,
};

/** How often a running command's disk use is measured. */
export const DISK_CHECK_MS = 1000;

/**
 * The rlimits, set on the command's own line so that bash's line numbers in errors stay right.
 * Hard limits too: the command cannot raise them again. bash counts -d and -f in KiB.
 */
export function ulimitPrefix(limits: SandboxLimits): string {
  const kib = (mb: number) => String(mb * 1024);
  return (
    `ulimit -H -S -u ${limits.processes} -d ${kib(limits.memoryMb)} -f ${kib(limits.fileMb)} ` +
    "|| exit 125; "
  );
}

/** Megabytes used under the paths, on their own filesystems; hard links counted once. */
export async function diskUsageMb(paths: readonly string[]): Promise<number> {
  const result = await launchAndCollect({
    file: "du",
    args: ["-s", "-x", "-c", "--block-size=1M", "--", ...paths],
    cwd: "/",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    group: false,
  });
  // du still prints a total when some file vanished under it (exit 1), as builds' files do.
  const total = /^(\d+)\s+total$/m.exec(result.stdout);
  if (!total) throw new Error(`du failed: ${result.stderr.trim()}`);
  return Number(total[1]);
}

export function diskNotice(usedMb: number, limits: SandboxLimits, stopped: boolean): string {
  return (
    `vmpilot: the workspace uses ${usedMb} MB of disk, over its limit of ${limits.diskMb} MB ` +
    `(SANDBOX_MAX_DISK_MB)${stopped ? "; the command was stopped" : ""}. ` +
    "Delete what is not needed, such as build output."
  );
}

/** Why a command ended early, when a limit explains it; for the model and the log. */
export function limitNotice(result: ExecResult, limits: SandboxLimits): string | undefined {
  const stderr = result.fullStderr;
  // SIGXFSZ: bash reports 128 + 25.
  if (result.exitCode === 153 || /File size limit exceeded/.test(stderr)) {
    return `vmpilot: a file reached the sandbox's size limit of ${limits.fileMb} MB (SANDBOX_MAX_FILE_MB).`;
  }
  if (/Resource temporarily unavailable|EAGAIN|Cannot fork|fork: retry/i.test(stderr)) {
    return (
      `vmpilot: the command may have hit the sandbox's limit of ${limits.processes} processes ` +
      "and threads (SANDBOX_MAX_PROCESSES); run fewer at once."
    );
  }
  if (
    /Cannot allocate memory|out of memory|allocation failed|MemoryError|bad_alloc/i.test(stderr)
  ) {
    return (
      `vmpilot: the command may have hit the sandbox's memory limit of ${limits.memoryMb} MB per ` +
      "process (SANDBOX_MAX_MEMORY_MB)."
    );
  }
  return undefined;
}

/** The result with a limit's message appended to what the model and the log see. */
export function withNotice(result: ExecResult, notice: string): ExecResult {
  const add = (text: string) =>
    `${text}${text === "" || text.endsWith("\n") ? "" : "\n"}${notice}\n`;
  return { ...result, stderr: add(result.stderr), fullStderr: add(result.fullStderr) };
}
