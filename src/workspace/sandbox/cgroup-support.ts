// Which cgroups the worker may make job cgroups below: cgroup v2 where the worker's cgroup delegates
// the controllers, else v1 (hybrid hosts bind them there). Found out once, by trying.
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { type Mount, parseMountInfo } from "./mountinfo.ts";
import { ownerTag } from "./stale.ts";

type Controller = "memory" | "pids";
export const CONTROLLERS: readonly Controller[] = ["memory", "pids"];

/** The cgroup the worker is in, for one controller: job cgroups are made below it. */
interface CgroupParent {
  version: 1 | 2;
  dir: string;
}

export interface CgroupSupport {
  memory?: CgroupParent;
  pids?: CgroupParent;
  /** Why the job's memory cgroup does not hold TCP buffers here; undefined when it does. */
  tcpProblem?: string;
  /** v1: the most a job's TCP buffers may be limited to, a share of the host's (tcpCeilingMb). */
  tcpCeilingMb?: number;
  /** Why a controller cannot be used, one line each; names no path (it goes to /healthz). */
  problems: Partial<Record<Controller, string>>;
}

/** Where `path` of a hierarchy is in this mount namespace, when the mount shows it. */
function locate(mount: Mount, path: string): string | undefined {
  const root = mount.root === "/" ? "" : mount.root;
  if (path !== root && !path.startsWith(`${root}/`)) return undefined;
  return resolve(mount.point, `.${path.slice(root.length)}`);
}

/**
 * The worker's own cgroup directories, from /proc/self/cgroup and /proc/self/mountinfo: the v2
 * one, and the v1 one of each controller bound to a v1 hierarchy.
 */
export function ownCgroups(
  procCgroup: string,
  mountInfo: string,
): { v2?: string; v1: Partial<Record<Controller, string>> } {
  const mounts = parseMountInfo(mountInfo);
  const found: { v2?: string; v1: Partial<Record<Controller, string>> } = { v1: {} };
  for (const line of procCgroup.split("\n")) {
    const match = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (!match) continue;
    const [, id, names = "", path = ""] = match;
    if (id === "0" && names === "") {
      for (const mount of mounts.filter((m) => m.type === "cgroup2")) {
        found.v2 ??= locate(mount, path);
      }
      continue;
    }
    for (const controller of CONTROLLERS) {
      if (!names.split(",").includes(controller)) continue;
      const mount = mounts.find((m) => m.type === "cgroup" && m.options.includes(controller));
      const dir = mount && locate(mount, path);
      if (dir) found.v1[controller] = dir;
    }
  }
  return found;
}

const words = async (file: string) =>
  (await readFile(file, "utf8").catch(() => "")).split(/\s+/).filter(Boolean);

/** The file a controller's limit is written to; "max" lifts it (v1 memory takes -1). */
export function limitFile(controller: Controller, version: 1 | 2): string {
  if (controller === "pids") return "pids.max";
  return version === 2 ? "memory.max" : "memory.limit_in_bytes";
}

/**
 * v1 charges TCP buffers to a counter of their own, and only once its limit is set; without it
 * they are bound only by the host's tcp_mem. v2 charges them to memory.max.
 */
export const TCP_LIMIT_FILE = "memory.kmem.tcp.limit_in_bytes";

/**
 * A quarter of the host's TCP memory pressure threshold (net.ipv4.tcp_mem, in 4 KiB pages): four
 * jobs at their limit bring the host's sockets only to where the kernel starts trimming buffers,
 * not to its hard limit, past which every socket stalls. Undefined when the file says nothing.
 */
export function tcpCeilingMb(tcpMem: string): number | undefined {
  const pressure = Number(tcpMem.trim().split(/\s+/)[1]);
  return Number.isSafeInteger(pressure) && pressure > 0
    ? Math.floor((pressure * 4096) / 4 / 2 ** 20)
    : undefined;
}

/** Makes and removes a child with a limit set: what a job needs, tried once at start. */
async function tryChild(parent: CgroupParent, file: string, value: string): Promise<void> {
  const dir = join(parent.dir, `vmpilot-${await ownerTag()}-${randomBytes(6).toString("hex")}`);
  await mkdir(dir);
  try {
    await writeFile(join(dir, file), value);
  } finally {
    await rmdir(dir);
  }
}

/**
 * cgroup v2 gives controllers to the children of a cgroup only while it holds no process itself.
 * A cgroup delegated to the worker (systemd's Delegate=yes) holds the worker: as systemd's
 * delegation notes advise, its processes move to a leaf, `vmpilot-worker`, under the same limits.
 */
async function enableV2(dir: string, controller: Controller): Promise<boolean> {
  const subtree = join(dir, "cgroup.subtree_control");
  for (let round = 0; round < 5; round++) {
    if ((await words(subtree)).includes(controller)) return true;
    const enabled = await writeFile(subtree, `+${controller}`).then(
      () => true,
      () => false,
    );
    if (enabled) return true;
    const pids = await readPids(dir).catch(() => []);
    if (pids.length === 0) return false;
    const leaf = join(dir, "vmpilot-worker");
    await mkdir(leaf).catch(() => undefined);
    for (const pid of pids) {
      // A process that exited meanwhile cannot move; one forked meanwhile is the next round's.
      await writeFile(join(leaf, "cgroup.procs"), String(pid)).catch(() => undefined);
    }
  }
  return false;
}

async function usableV2(dir: string, controller: Controller): Promise<CgroupParent | string> {
  if (!(await words(join(dir, "cgroup.controllers"))).includes(controller)) {
    return "cgroup v2 does not offer it to the worker's cgroup";
  }
  if (!(await enableV2(dir, controller))) {
    return "cgroup v2 does not delegate it to the worker's cgroup's children";
  }
  return { version: 2, dir };
}

async function findParent(
  controller: Controller,
  own: ReturnType<typeof ownCgroups>,
): Promise<CgroupParent | string> {
  const v1 = own.v1[controller];
  const candidate = v1
    ? { version: 1 as const, dir: v1 }
    : own.v2 && (await usableV2(own.v2, controller));
  if (candidate === undefined) return "no cgroup hierarchy offers it here";
  if (typeof candidate === "string") return candidate;
  try {
    const unlimited = controller === "memory" && candidate.version === 1 ? "-1" : "max";
    await tryChild(candidate, limitFile(controller, candidate.version), unlimited);
    return candidate;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "an error";
    return `the worker cannot create cgroups below its own (${code})`;
  }
}

let support: Promise<CgroupSupport> | undefined;

/** What this machine lets the worker do with cgroups; found out once. */
export function cgroupSupport(): Promise<CgroupSupport> {
  support ??= (async () => {
    const [procCgroup, mountInfo] = await Promise.all([
      readFile("/proc/self/cgroup", "utf8").catch(() => ""),
      readFile("/proc/self/mountinfo", "utf8").catch(() => ""),
    ]);
    const own = ownCgroups(procCgroup, mountInfo);
    const found: CgroupSupport = { problems: {} };
    for (const controller of CONTROLLERS) {
      const parent = await findParent(controller, own);
      if (typeof parent === "string") found.problems[controller] = parent;
      else found[controller] = parent;
    }
    if (found.memory?.version === 1) {
      const code = await tryChild(found.memory, TCP_LIMIT_FILE, "-1").then(
        () => undefined,
        (error: NodeJS.ErrnoException) => error.code ?? "an error",
      );
      if (code) found.tcpProblem = `cgroup v1 does not let the worker limit TCP buffers (${code})`;
      else {
        found.tcpCeilingMb = tcpCeilingMb(
          await readFile("/proc/sys/net/ipv4/tcp_mem", "utf8").catch(() => ""),
        );
      }
    }
    return found;
  })();
  return support;
}

export async function readPids(dir: string): Promise<number[]> {
  return (await words(join(dir, "cgroup.procs"))).map(Number);
}
