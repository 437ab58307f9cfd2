import { statfsSync } from "node:fs";
import { readdir, readlink, stat } from "node:fs/promises";
import { launchAndCollect } from "../process/launcher.ts";
import { programPath } from "../process/program.ts";
import type { ScratchDisk } from "./scratch-disk.ts";

const MIB = 1024 * 1024;

export interface DiskMeter {
  /**
   * Megabytes the workspace uses: what `du` finds under the measured paths, the scratch disk, and
   * files on the measured filesystems that the job's processes hold open after deleting them.
   */
  usedMb(): Promise<number>;
  /**
   * Bytes in use on the measured paths' whole filesystems and the scratch disk: a cheap call per
   * filesystem, so fast growth shows at once.
   */
  hostUsedBytes(): Promise<number>;
}

/** Megabytes used under the paths, on their own filesystems; hard links counted once. */
async function diskUsageMb(paths: readonly string[]): Promise<number> {
  const result = await launchAndCollect({
    file: programPath("du"),
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

/**
 * Bytes of regular files on `devices` that the processes hold open with no name left: `du` cannot
 * see them, the disk holds them until the last one closes. Each file counted once.
 */
async function openDeletedBytes(
  pids: readonly number[],
  devices: ReadonlySet<number>,
): Promise<number> {
  const seen = new Set<string>();
  let bytes = 0;
  for (const pid of pids) {
    const fds = await readdir(`/proc/${pid}/fd`).catch(() => []);
    for (const fd of fds) {
      const path = `/proc/${pid}/fd/${fd}`;
      const target = await readlink(path).catch(() => "");
      if (!target.endsWith(" (deleted)")) continue;
      const file = await stat(path).catch(() => undefined);
      if (!file?.isFile() || file.nlink !== 0 || !devices.has(file.dev)) continue;
      const key = `${file.dev}:${file.ino}`;
      if (seen.has(key)) continue;
      seen.add(key);
      bytes += file.blocks * 512;
    }
  }
  return bytes;
}

export function diskMeter(options: {
  /**
   * Measured with `du`: the checkout first, then /tmp and HOME unless on the scratch disk; none
   * when the checkout is on the scratch disk too.
   */
  paths: readonly string[];
  scratch?: ScratchDisk;
  /** The job's processes (its cgroup's); without them, open deleted files go uncounted. */
  processes?: () => Promise<number[]>;
}): DiskMeter {
  const { paths, scratch, processes } = options;
  // The scratch disk's own count already holds its deleted files; memfds are memory.
  const stats = Promise.all(paths.map((path) => stat(path)));
  const devices = stats.then((all) => new Set(all.map((s) => s.dev)));
  /** One measured path per filesystem. */
  const filesystems = stats.then((all) =>
    paths.filter((_, i) => all.findIndex((s) => s.dev === all[i]?.dev) === i),
  );
  return {
    async usedMb() {
      const [du, scratchBytes, deleted] = await Promise.all([
        paths.length > 0 ? diskUsageMb(paths) : 0,
        scratch?.usedBytes() ?? 0,
        processes ? processes().then(async (pids) => openDeletedBytes(pids, await devices)) : 0,
      ]);
      return du + Math.ceil((scratchBytes + deleted) / MIB);
    },
    async hostUsedBytes() {
      // Before and after every command: a syscall each, cheaper than a trip through the thread pool.
      let used = (await scratch?.usedBytes()) ?? 0;
      for (const path of await filesystems) {
        const fs = statfsSync(path);
        used += (fs.blocks - fs.bfree) * fs.bsize;
      }
      return used;
    },
  };
}
