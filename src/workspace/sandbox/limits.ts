import type { SandboxLimits } from "../../config/workspace.ts";
import type { ExecResult } from "../types.ts";
import { sweepCgroups } from "./cgroup.ts";
import { type CgroupSupport, cgroupSupport } from "./cgroup-support.ts";
import { diskInodes, scratchDiskProblem, sweepScratchDisks } from "./scratch-disk.ts";

export { DEFAULT_LIMITS, type SandboxLimits } from "../../config/workspace.ts";

/**
 * The rlimits, set on the command's own line so that bash's line numbers in errors stay right.
 * Hard limits too: the command cannot raise them again. bash counts -d and -f in KiB. Over the
 * disk limit, files cannot grow at all: the command may still delete, and so get back under.
 */
export function ulimitPrefix(limits: SandboxLimits, overDisk = false): string {
  const kib = (mb: number) => String(mb * 1024);
  return (
    `ulimit -H -S -u ${limits.processes} -d ${kib(limits.memoryMb)} ` +
    `-f ${overDisk ? "0" : kib(limits.fileMb)} || exit 125; `
  );
}

export function diskNotice(
  usedMb: number,
  limits: SandboxLimits,
  when: "stopped" | "after" | "before",
): string {
  const what = {
    stopped: "; the command was stopped",
    after: "; until it is under, commands cannot write files",
    before: ", so this command could not write files",
  }[when];
  return (
    `vmpilot: the workspace uses ${usedMb} MB of disk, over its limit of ${limits.diskMb} MB ` +
    `(SANDBOX_MAX_DISK_MB)${what}. Delete what is not needed, such as build output.`
  );
}

/** Why a command ended early, from what the kernel counted in the job's cgroup. */
export function cgroupNotice(
  hits: { oomKills: number; forksRefused: number },
  limits: SandboxLimits,
): string | undefined {
  if (hits.oomKills > 0) {
    return (
      `vmpilot: the command's processes together reached the sandbox's memory limit of ` +
      `${limits.memoryMb} MB (SANDBOX_MAX_MEMORY_MB); the kernel killed ` +
      `${hits.oomKills === 1 ? "one of them" : `${hits.oomKills} of them`}.`
    );
  }
  if (hits.forksRefused > 0) {
    return (
      `vmpilot: the command reached the sandbox's limit of ${limits.processes} processes and ` +
      "threads (SANDBOX_MAX_PROCESSES); run fewer at once."
    );
  }
  return undefined;
}

/** Why a command ended early, when a limit explains it; for the model and the log. */
export function limitNotice(result: ExecResult, limits: SandboxLimits): string | undefined {
  const stderr = result.fullStderr;
  // SIGXFSZ: bash reports 128 + 25.
  if (result.exitCode === 153 || /File size limit exceeded/.test(stderr)) {
    return `vmpilot: a file reached the sandbox's size limit of ${limits.fileMb} MB (SANDBOX_MAX_FILE_MB).`;
  }
  if (/No space left on device/.test(stderr)) {
    return (
      "vmpilot: a disk may be full; the checkout, /tmp and HOME share the sandbox's disk limit of " +
      `${limits.diskMb} MB (SANDBOX_MAX_DISK_MB) and ${diskInodes(limits.diskMb)} files and ` +
      "directories. Delete what is not needed."
    );
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

/** What this host lets the kernel enforce of the sandbox limits. */
export interface KernelSupport {
  cgroups: CgroupSupport;
  /**
   * Why a job's checkout, /tmp and HOME cannot have a filesystem of the disk limit's size;
   * undefined when they can.
   */
  scratchProblem: string | undefined;
}

let support: Promise<KernelSupport> | undefined;

/** Found out once per process, which then also removes what dead workers left (stale.ts). */
export function kernelSupport(): Promise<KernelSupport> {
  support ??= (async () => {
    const [cgroups, scratchProblem] = await Promise.all([cgroupSupport(), scratchDiskProblem()]);
    // Cgroups first: what still runs in them may hold a scratch disk.
    await sweepCgroups(cgroups);
    if (scratchProblem === undefined) await sweepScratchDisks();
    return { cgroups, scratchProblem };
  })();
  return support;
}

/** How each limit is enforced here, one line each, for operators (/healthz, the log). */
export interface LimitEnforcement {
  memory: string;
  processes: string;
  disk: string;
  /** False when any limit is only best effort. */
  kernel: boolean;
}

/** What holds the job's memory here, TCP buffers included. */
function memoryEnforcement(cgroups: CgroupSupport): string {
  if (!cgroups.memory) {
    return `best effort: per process only (RLIMIT_DATA; memfds, shared memory and TCP buffers escape it); ${cgroups.problems.memory}`;
  }
  if (cgroups.memory.version === 2) {
    return "kernel: the job's cgroup (v2) holds memory, swap and TCP buffers";
  }
  if (cgroups.tcpProblem) {
    return `kernel: the job's cgroup (v1) holds memory and swap; TCP buffers escape it, bound only by the host's tcp_mem (${cgroups.tcpProblem})`;
  }
  const ceiling =
    cgroups.tcpCeilingMb === undefined
      ? ""
      : `, at most ${cgroups.tcpCeilingMb} MB (a quarter of the host's tcp_mem pressure threshold)`;
  return `kernel: the job's cgroup (v1) holds memory and swap, and TCP buffers to a limit of their own of the same size${ceiling}`;
}

export async function limitEnforcement(): Promise<LimitEnforcement> {
  const { cgroups, scratchProblem } = await kernelSupport();
  const memory = memoryEnforcement(cgroups);
  const processes = cgroups.pids
    ? `kernel: the job's cgroup (v${cgroups.pids.version})`
    : `best effort: per command (RLIMIT_NPROC); ${cgroups.problems.pids}`;
  const measured =
    cgroups.memory || cgroups.pids
      ? "files deleted while open included"
      : "files deleted while open not counted (no job cgroup)";
  const disk = scratchProblem
    ? `best effort: measured before, during and after commands, ${measured}; ${scratchProblem}`
    : "kernel: the checkout, /tmp and HOME on a filesystem of the limit's size, with one inode per 16 KiB of it";
  return {
    memory,
    processes,
    disk,
    kernel: Boolean(cgroups.memory && !cgroups.tcpProblem && cgroups.pids && !scratchProblem),
  };
}
