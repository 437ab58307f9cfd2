// What a worker process and the processes it starts cost, read from /proc (CPU) and from strace
// (how many processes, and how many execve calls failed), for bench/scale.ts; and what a server's
// helper threads cost, for bench/intake.ts.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, readdirSync, readFileSync } from "node:fs";

const TICKS_PER_SECOND = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;

interface Times {
  /** CPU seconds of the process itself. */
  self: number;
  /** CPU seconds of the children it has reaped, and of theirs. */
  children: number;
}

function times(pid: number): Times {
  return timesIn(readFileSync(`/proc/${pid}/stat`, "utf8"));
}

/** The times in a stat file's text, a process's or a thread's. */
function timesIn(stat: string): Times {
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // Fields 14 to 17 of proc(5); the slice starts at field 3.
  const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number) as number[];
  return {
    self: ((utime ?? 0) + (stime ?? 0)) / TICKS_PER_SECOND,
    children: ((cutime ?? 0) + (cstime ?? 0)) / TICKS_PER_SECOND,
  };
}

function childrenOf(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) found.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/**
 * CPU seconds of this process's threads whose name starts with `prefix` (V8's helper threads are
 * "V8…"); 0 where there is no /proc.
 */
export function threadsCpu(prefix: string): number {
  const tasks = "/proc/self/task";
  if (!existsSync(tasks)) return 0;
  let seconds = 0;
  for (const id of readdirSync(tasks)) {
    const stat = readFileSync(`${tasks}/${id}/stat`, "utf8");
    const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    if (name.startsWith(prefix)) seconds += timesIn(stat).self;
  }
  return seconds;
}

/** The worker's process launcher (src/workspace/process/launcher.ts), once it has started. */
function launcherOf(worker: number): number | undefined {
  return childrenOf(worker).find((pid) =>
    readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("launcher-process"),
  );
}

/** CPU seconds of the children `pid` has reaped so far (for a process that waits for its own). */
export function reapedCpu(pid: number): number {
  return times(pid).children;
}

export interface Usage {
  /** The worker process itself. */
  worker: number;
  /** The launcher itself. */
  launcher: number;
  /** What the launcher started (git, the job's commands), with their own children. */
  started: number;
}

/** CPU seconds a worker and its launcher used so far. */
export function usageOf(worker: number): Usage {
  const launcher = launcherOf(worker);
  const launched = launcher ? times(launcher) : { self: 0, children: 0 };
  return { worker: times(worker).self, launcher: launched.self, started: launched.children };
}

export function usageSince(before: Usage, after: Usage): Usage {
  return {
    worker: after.worker - before.worker,
    launcher: after.launcher - before.launcher,
    started: after.started - before.started,
  };
}

export interface Trace {
  /** Stops tracing; resolves to the processes made and the execve calls that failed. */
  stop(): Promise<{ processes: number; failedExecs: number }>;
}

/** Follows a worker and every process it starts with strace, counting processes (not threads). */
export async function traceProcesses(worker: number, file: string): Promise<Trace> {
  const pids = [worker, ...childrenOf(worker)].flatMap((pid) => ["-p", String(pid)]);
  const strace: ChildProcess = spawn(
    "strace",
    ["-f", "-qq", "-e", "trace=execve,clone,clone3,fork,vfork", "-o", file, ...pids],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let attached = "";
  strace.stderr?.on("data", (chunk) => {
    attached += chunk;
  });
  // strace prints nothing once attached (-qq); give it the moment attaching takes.
  await new Promise((resolve) => setTimeout(resolve, 500));
  if (strace.exitCode !== null) throw new Error(`strace failed: ${attached.trim()}`);
  return {
    async stop() {
      // One that ended early followed only part of the run.
      if (strace.exitCode !== null) throw new Error(`strace ended early: ${attached.trim()}`);
      strace.kill("SIGINT");
      await once(strace, "exit");
      return countTrace(readFileSync(file, "utf8"));
    },
  };
}

/** Processes (clones without CLONE_THREAD, forks) and failed execve calls in strace -f output. */
function countTrace(text: string): { processes: number; failedExecs: number } {
  const pending = new Map<string, string>();
  let processes = 0;
  let failedExecs = 0;
  for (const line of text.split("\n")) {
    // strace pads the pid column.
    const [, pid = "", rest = ""] = /^(\d+)\s+(.*)$/.exec(line) ?? [];
    const unfinished = /^(.*) <unfinished \.\.\.>$/.exec(rest);
    if (unfinished) {
      pending.set(pid, unfinished[1] ?? "");
      continue;
    }
    const resumed = /^<\.\.\. \w+ resumed>(.*)$/.exec(rest);
    const call = resumed ? `${pending.get(pid) ?? ""}${resumed[1]}` : rest;
    if (resumed) pending.delete(pid);
    const result = /\) += (-?\d+)(?: \w+ \(.*\))?$/.exec(call)?.[1];
    if (result === undefined) continue;
    if (/^execve\(/.test(call)) {
      if (Number(result) < 0) failedExecs++;
    } else if (/^(clone3?|v?fork)\(/.test(call) && Number(result) > 0) {
      if (!call.includes("CLONE_THREAD")) processes++;
    }
  }
  return { processes, failedExecs };
}
