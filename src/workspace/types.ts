import type { WorkspaceChoice } from "../config/workspace.ts";

/** What a command run inside a workspace reports back. */
export interface ExecResult {
  /** Output as the model sees it: capped, with head and tail kept. */
  stdout: string;
  stderr: string;
  exitCode: number | null;
  timedOut: boolean;
  /** True when stdout or stderr was cut to fit the cap. */
  truncated: boolean;
  /** Uncapped output, for the job log only. */
  fullStdout: string;
  fullStderr: string;
  durationMs: number;
}

interface ExecOptions {
  /** Default 120 s. On timeout the whole process tree is killed. */
  timeoutMs?: number;
  /** Extra variables on top of the workspace's allow-listed environment. */
  env?: Record<string, string>;
  /** Relative to the workspace root. */
  cwd?: string;
  /** Aborting kills the process tree, like a timeout. */
  signal?: AbortSignal;
}

/** A command of the workspace's that keeps running while the worker talks to it over its stdio. */
export interface WorkspaceProcess {
  /** Writes to its stdin; resolves once the workspace took it. */
  write(data: string): Promise<void>;
  /** Stops it, and whatever it started. */
  kill(): void;
  /** Settles once it ended: its exit code (null when killed), or why it could not run. */
  exited: Promise<ProcessEnd>;
}

export interface ProcessEnd {
  code: number | null;
  /** Why it ended, when it did not end by itself or by kill(): "it could not start: …". */
  error?: string;
}

export interface SpawnOptions {
  /** Its output, as it comes. */
  onOutput(stream: "stdout" | "stderr", chunk: Buffer): void;
  /** Aborting kills it. */
  signal?: AbortSignal;
}

/**
 * A git checkout plus a way to run commands on it, with the isolation it holds them to and the
 * engine that runs them. Commands never see the worker's secrets.
 */
export interface Workspace extends Readonly<WorkspaceChoice> {
  /** Absolute path of the checkout where commands run (on a VM, the VM's path). */
  readonly root: string;
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  /**
   * Paths are relative to root; anything that resolves outside root is rejected, and so is
   * anything that is not a regular file or is over `maxBytes` (FileRefusedError), before reading.
   */
  readFile(path: string, maxBytes: number): Promise<Buffer>;
  /**
   * Copies a file of the workspace to `dest`, a new file of the worker's, as readFile would read
   * it but streamed: for files too large to hold in memory (a bundle of new commits).
   */
  copyOut(path: string, dest: string, maxBytes: number): Promise<void>;
  writeFile(path: string, data: string | Buffer): Promise<void>;
  /**
   * Starts a command like exec does, in the checkout, and keeps it running with its stdin open
   * (an MCP server): the same isolation, limits, network and kill rules as any command. It dies
   * with the workspace.
   */
  spawn(command: string, options: SpawnOptions): Promise<WorkspaceProcess>;
  /** Entry names, sorted; directories end with "/". */
  listDir(path: string): Promise<string[]>;
  /** Hosts the sandbox refused to connect to, for the run report. */
  blockedConnections(): readonly BlockedConnection[];
  dispose(): Promise<void>;
}

export interface BlockedConnection {
  host: string;
  port: number;
  /** Set when the host is allow-listed but resolves to an address the sandbox may not reach. */
  reason?: string;
  at: Date;
}
