import { execFileSync } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { ownCgroups } from "../../src/workspace/sandbox/cgroup-support.ts";

/** A process that has exited but not been reaped is dead for our purposes. */
export async function isAlive(pid: number): Promise<boolean> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** Pids of live processes whose command line contains `token`. */
export async function processesWith(token: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    if (cmdline.includes(token) && (await isAlive(Number(entry)))) pids.push(Number(entry));
  }
  return pids;
}

/** SIGKILL is delivered at once but dying takes a moment; wait for it, bounded. */
export async function waitUntil(check: () => Promise<boolean>, timeoutMs = 3000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return check();
}

/**
 * Deadlines fired by hand, for a workspace agent's calls: `fire(ms)` gives up on the calls that
 * were given `ms`; `asked(ms)` settles once one was.
 */
export function handDeadlines() {
  const given: Array<{ ms: number; controller: AbortController }> = [];
  const waiting: Array<{ ms: number; resolve: () => void }> = [];
  return {
    deadline: (ms: number) => {
      const controller = new AbortController();
      given.push({ ms, controller });
      for (const each of waiting.filter((w) => w.ms === ms)) each.resolve();
      return controller.signal;
    },
    given: () => given.map((each) => each.ms),
    asked: (ms: number) =>
      given.some((g) => g.ms === ms)
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiting.push({ ms, resolve })),
    fire(ms: number) {
      for (const each of given.filter((g) => g.ms === ms)) each.controller.abort();
    },
  };
}

/** A pino-shaped logger that records what it was given. */
export function recordingLogger() {
  const lines: { level: string; args: unknown[] }[] = [];
  const log =
    (level: string) =>
    (...args: unknown[]) => {
      lines.push({ level, args });
    };
  return { lines, error: log("error"), warn: log("warn"), info: log("info"), debug: log("debug") };
}

/** Writes `text` to `file` in `repo` and commits it, with a fixed identity and no global config. */
export function commitFile(repo: string, file: string, text: string): void {
  execFileSync(
    "sh",
    ["-c", `printf %s "$1" > "$2" && git add -A && git commit -qm "$2"`, "sh", text, file],
    {
      cwd: repo,
      env: {
        PATH: process.env.PATH,
        GIT_AUTHOR_NAME: "t",
        GIT_AUTHOR_EMAIL: "t@example.com",
        GIT_COMMITTER_NAME: "t",
        GIT_COMMITTER_EMAIL: "t@example.com",
      },
    },
  );
}

/** Whether something is mounted at `dir` here. */
export async function mountedAt(dir: string): Promise<boolean> {
  const mounts = await readFile("/proc/self/mountinfo", "utf8");
  return mounts.split("\n").some((line) => line.split(" ")[4] === dir);
}

/** The job cgroup directories of a process, from its /proc/<pid>/cgroup as it printed it. */
export async function jobCgroupDirs(procCgroup: string): Promise<string[]> {
  const own = ownCgroups(procCgroup, await readFile("/proc/self/mountinfo", "utf8"));
  return [own.v2, own.v1.memory, own.v1.pids].filter(
    (dir): dir is string => dir?.includes("/vmpilot-") ?? false,
  );
}
