// A cgroup per job, so that the kernel holds the job's memory (swap, memfds, shared memory and
// TCP buffers included, which rlimits per process do not count) and its processes as a whole.
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { access, mkdir, readdir, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { programPath } from "../process/program.ts";
import {
  type CgroupSupport,
  CONTROLLERS,
  limitFile,
  readPids,
  TCP_LIMIT_FILE,
} from "./cgroup-support.ts";
import { ownerGone, ownerTag } from "./stale.ts";

export interface JobCgroup {
  /** Where a process writes its pid to join, before it runs the command. */
  readonly procsFiles: readonly string[];
  /** The job's processes now (host pids). */
  pids(): Promise<number[]>;
  /** How often the kernel held each limit so far: processes killed for memory, forks refused. */
  hits(): Promise<{ oomKills: number; forksRefused: number }>;
  /** Kills what still runs in it and removes it. */
  remove(): Promise<void>;
}

const exists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );

/**
 * Read around every command: a small file the kernel makes up on the spot, read at once rather
 * than through the thread pool, which costs more than the read.
 */
function counter(file: string, name: string): number {
  let text = "";
  try {
    text = readFileSync(file, "utf8");
  } catch {
    // No such controller file: nothing counted.
  }
  return Number(new RegExp(`^${name} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
}

async function killAll(dir: string): Promise<void> {
  // cgroup.kill (v2, Linux 5.14) reaches processes forked meanwhile; v1 needs rounds.
  const kill = join(dir, "cgroup.kill");
  if (await exists(kill)) await writeFile(kill, "1");
  for (let round = 0; round < 200; round++) {
    const pids = await readPids(dir).catch(() => []);
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
    await delay(10);
  }
}

/** rmdir fails while a killed process is still exiting. */
async function removeDir(dir: string): Promise<void> {
  for (let round = 0; ; round++) {
    try {
      await rmdir(dir);
      return;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return;
      if (code !== "EBUSY" || round >= 200) throw error;
      await delay(10);
    }
  }
}

async function removeCgroups(dirs: readonly string[]): Promise<void> {
  for (const dir of dirs) await killAll(dir);
  for (const dir of dirs) await removeDir(dir);
}

/** A job cgroup's name: its worker's ownerTag, then a random part. */
const JOB_CGROUP = /^vmpilot-(\d+-\d+)-[0-9a-f]{12}$/;

/** Removes the job cgroups of workers that are gone, what they ran included (stale.ts). */
export async function sweepCgroups(found: CgroupSupport): Promise<void> {
  const parents = new Set(CONTROLLERS.flatMap((controller) => found[controller]?.dir ?? []));
  for (const parent of parents) {
    for (const name of await readdir(parent).catch(() => [])) {
      const owner = JOB_CGROUP.exec(name)?.[1];
      if (owner && (await ownerGone(owner))) {
        await removeCgroups([join(parent, name)]).catch(() => undefined);
      }
    }
  }
}

/**
 * A cgroup for one job, under each controller's parent, with the limits set: memory including
 * swap and TCP buffers, and processes. Undefined when the machine allows neither controller.
 */
export async function createJobCgroup(
  limits: { memoryMb: number; processes: number },
  found: CgroupSupport,
): Promise<JobCgroup | undefined> {
  const name = `vmpilot-${await ownerTag()}-${randomBytes(6).toString("hex")}`;
  const dirs: string[] = [];
  const remove = () => removeCgroups(dirs.splice(0));
  let memoryDir: { dir: string; version: 1 | 2 } | undefined;
  let pidsDir: string | undefined;
  try {
    for (const controller of CONTROLLERS) {
      const parent = found[controller];
      if (!parent) continue;
      const dir = join(parent.dir, name);
      if (!dirs.includes(dir)) {
        await mkdir(dir);
        dirs.push(dir);
      }
      if (controller === "pids") {
        await writeFile(join(dir, "pids.max"), String(limits.processes));
        pidsDir = dir;
        continue;
      }
      const bytes = String(limits.memoryMb * 1024 * 1024);
      // Swap must not stretch the limit: v1 limits memory and swap together, v2 allows no swap.
      const swap =
        parent.version === 2
          ? { file: "memory.swap.max", value: "0" }
          : { file: "memory.memsw.limit_in_bytes", value: bytes };
      await writeFile(join(dir, limitFile("memory", parent.version)), bytes);
      if (await exists(join(dir, swap.file))) await writeFile(join(dir, swap.file), swap.value);
      // Before any process joins: v1 charges a socket's buffers only if its cgroup had the limit
      // when the socket was made. They get a limit of their own, of the same size at most.
      if (parent.version === 1 && !found.tcpProblem) {
        const tcpMb = Math.min(limits.memoryMb, found.tcpCeilingMb ?? limits.memoryMb);
        await writeFile(join(dir, TCP_LIMIT_FILE), String(tcpMb * 1024 * 1024));
      }
      memoryDir = { dir, version: parent.version };
    }
  } catch (error) {
    await remove();
    throw error;
  }
  if (dirs.length === 0) return undefined;
  const first = dirs[0] as string;
  return {
    procsFiles: dirs.map((dir) => join(dir, "cgroup.procs")),
    pids: () => readPids(first),
    async hits() {
      const events = memoryDir?.version === 2 ? "memory.events" : "memory.oom_control";
      return {
        oomKills: memoryDir ? counter(join(memoryDir.dir, events), "oom_kill") : 0,
        forksRefused: pidsDir ? counter(join(pidsDir, "pids.events"), "max") : 0,
      };
    },
    remove,
  };
}

/**
 * Runs a program in the job's cgroup: a shell outside the sandbox writes its own pid to each
 * cgroup.procs file, then becomes the program, so nothing of it runs outside the cgroup.
 */
export function inCgroup(
  cgroup: JobCgroup | undefined,
  file: string,
  args: readonly string[],
): { file: string; args: string[] } {
  if (!cgroup) return { file, args: [...args] };
  const script =
    'while [ "$1" != -- ]; do echo $$ > "$1" || ' +
    '{ echo "vmpilot: could not enter the job\'s cgroup" >&2; exit 125; }; shift; done; shift; exec "$@"';
  return {
    file: programPath("sh"),
    args: ["-c", script, "vmpilot-cgroup", ...cgroup.procsFiles, "--", file, ...args],
  };
}
