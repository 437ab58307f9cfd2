// The names and limits of where a job's commands run, as the operator's environment sets them
// (env.ts); the workspace layer builds on them.

/**
 * "agent": the workspace agent in a local sandbox, standing in for a VM (workspace/agent/local.ts);
 * "fly" and "kubernetes": the workspace agent in a Fly Machine or a pod (workspace/vm/).
 */
export type ProviderName = "sandbox" | "host" | "agent" | "fly" | "kubernetes";

/** The VM engines. */
export type VmProviderName = "fly" | "kubernetes";

/**
 * What one sandbox may use. Where the host allows, the kernel holds the job as a whole: a cgroup
 * for memory and processes, a filesystem of the limit's size for /tmp and HOME. Always, rlimits in
 * the command's shell hold each process, and disk use is measured around and during commands.
 */
export interface SandboxLimits {
  /** Processes and threads: the job's cgroup (pids.max), and RLIMIT_NPROC per command. */
  processes: number;
  /** Memory of the whole job, swap and memfds included (cgroup), and per process (RLIMIT_DATA). */
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
