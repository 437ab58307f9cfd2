// How strictly and where a job's commands run, and with what limits, as the operator's environment
// sets them (env.ts); the workspace layer builds on them.

/** How strictly a job's commands are kept from the worker and each other, weakest first. */
export const ISOLATIONS = ["none", "sandbox", "vm"] as const;
export type Isolation = (typeof ISOLATIONS)[number];

/**
 * What carries the isolation out: "local" is this machine (no isolation, or a bubblewrap sandbox
 * per job with the workspace agent in it); "fly" and "kubernetes" run the workspace agent in a Fly
 * Machine or a pod of the job's own (workspace/vm/).
 */
export const ENGINES = ["local", "fly", "kubernetes"] as const;
export type Engine = (typeof ENGINES)[number];

/**
 * How strict and where. For the operator, the least isolation every job gets and the engine `vm`
 * isolation runs on; for one workspace, what it gets (workspace/isolation.ts picks it).
 */
export interface WorkspaceChoice {
  isolation: Isolation;
  engine: Engine;
}

/** The one default, for the server and the CLI alike. */
export const DEFAULT_WORKSPACE: WorkspaceChoice = { isolation: "sandbox", engine: "local" };

/** Why one workspace cannot have this isolation on this engine, or undefined when it can. */
export function mismatch({ isolation, engine }: WorkspaceChoice): string | undefined {
  if (isolation === "vm" && engine === "local") {
    return "vm isolation needs a VM engine: fly or kubernetes";
  }
  if (isolation !== "vm" && engine !== "local") {
    return `the ${engine} engine runs vm isolation only, not ${isolation}`;
  }
  return undefined;
}

/** WORKSPACE_PROVIDER and the CLI's --provider, which named both at once; read until removed. */
export const OLD_PROVIDERS = ["sandbox", "agent", "fly", "kubernetes", "host"] as const;

/**
 * What an old provider name meant. `sandbox` (a sandbox per command) gets the workspace agent's
 * sandbox per job now: the same isolation and limits, held to the same tests.
 */
export function fromOldProvider(name: (typeof OLD_PROVIDERS)[number]): WorkspaceChoice {
  if (name === "fly" || name === "kubernetes") return { isolation: "vm", engine: name };
  return { isolation: name === "host" ? "none" : "sandbox", engine: "local" };
}

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
