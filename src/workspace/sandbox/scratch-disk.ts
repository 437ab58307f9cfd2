// A job's disk: an ext4 image of the disk limit's size, loop-mounted, so the kernel refuses writes
// past it (ENOSPC), whatever makes them: fallocate (with --keep-size too), files deleted while
// open or only mapped, and inodes, of which it has a bounded count. A job's checkout, /tmp and HOME
// live on it (sandbox.ts, openJobDisk), or /tmp and HOME alone where the checkout was made first.
// Not a tmpfs: that would be RAM charged to the job's memory limit. Not bwrap's `--size --tmpfs`
// either: each command gets a new one, and /tmp and HOME must persist between commands.
import { statfsSync } from "node:fs";
import { chmod, mkdtemp, open, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { launchAndCollect } from "../process/launcher.ts";
import { parseMountInfo } from "./mountinfo.ts";
import { ownerGone, ownerTag } from "./stale.ts";

export interface ScratchDisk {
  /** Bytes in use, files deleted while open included. */
  usedBytes(): Promise<number>;
  /** Unmounts it and removes its image. */
  unmount(): Promise<void>;
  /** Unmounts it and keeps its image, to be attached again; fails while anything holds it. */
  detach(): Promise<void>;
}

const IMAGE = "scratch.img";
/** One inode per this many bytes of the disk limit: ext4's default ratio, and bounded. */
const BYTES_PER_INODE = 16 * 1024;

/** How many files and directories a job's disk of `mb` holds. */
export function diskInodes(mb: number): number {
  return Math.max(64, Math.floor((mb * 1024 * 1024) / BYTES_PER_INODE));
}

/** Which worker mounted it, for sweepScratchDisks; outside the sandbox's /tmp and HOME. */
const OWNER = ".vmpilot-owner";

async function run(file: string, args: readonly string[]): Promise<void> {
  const result = await launchAndCollect({
    file,
    args,
    cwd: "/",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    group: false,
  }).catch((error: NodeJS.ErrnoException) => {
    throw new Error(error.code === "ENOENT" ? `${file} not found` : error.message);
  });
  if (result.code !== 0) {
    throw new Error(`${file} failed: ${result.stderr.trim() || `exit code ${result.code}`}`);
  }
}

/**
 * Makes the image of a fresh filesystem of `mb` in `dir`, for attachScratchDisk: a job's spare
 * checkout is made on one and kept unmounted (spares.ts).
 */
export async function makeScratchImage(dir: string, mb: number): Promise<void> {
  const image = join(dir, IMAGE);
  const file = await open(image, "w");
  try {
    await file.truncate(mb * 1024 * 1024);
  } finally {
    await file.close();
  }
  // No journal: a job's scratch is not worth one. Inode tables are zeroed neither by mkfs nor
  // later by the kernel (noinit_itable), which would fill the sparse image; discard keeps it sparse.
  // Its own inode count: on the host's filesystem, running out of inodes stops the worker too.
  const mkfs = ["-q", "-F", "-m", "0", "-N", String(diskInodes(mb)), "-O", "^has_journal"];
  mkfs.push("-E", "lazy_itable_init=1", image);
  await run("mkfs.ext4", mkfs).catch(async (error: unknown) => {
    await rm(image, { force: true });
    throw error;
  });
}

/**
 * Mounts the filesystem whose image lies in `dir` over `dir`: below the mount, out of the
 * sandbox's sight, and gone with `dir`.
 */
export async function attachScratchDisk(dir: string): Promise<ScratchDisk> {
  const image = join(dir, IMAGE);
  try {
    await run("mount", ["-o", "loop,nosuid,nodev,noinit_itable,discard", image, dir]);
    // As private as the directory it covers: other jobs' sandboxes share one host uid.
    await chmod(dir, 0o700);
    await writeFile(join(dir, OWNER), await ownerTag());
  } catch (error) {
    await unmount(dir).catch(() => undefined);
    await rm(image, { force: true });
    throw error;
  }
  return {
    async usedBytes() {
      // Before and after every command: a syscall, cheaper than a trip through the thread pool.
      const stats = statfsSync(dir);
      return (stats.blocks - stats.bfree) * stats.bsize;
    },
    async unmount() {
      await unmount(dir);
      await rm(image, { force: true });
    },
    async detach() {
      await run("umount", [dir]);
    },
  };
}

/** Mounts a fresh filesystem of `mb` over `dir`. */
export async function mountScratchDisk(dir: string, mb: number): Promise<ScratchDisk> {
  await makeScratchImage(dir, mb);
  return attachScratchDisk(dir);
}

/** Lazily when something still holds it open: the loop device goes once that lets go. */
async function unmount(dir: string): Promise<void> {
  await run("umount", [dir]).catch(() => run("umount", ["-l", dir]));
}

/**
 * Removes the scratch disks of workers that are gone (stale.ts), and the state directories they
 * cover, which held nothing else.
 */
export async function sweepScratchDisks(): Promise<void> {
  const mounts = parseMountInfo(await readFile("/proc/self/mountinfo", "utf8").catch(() => ""));
  for (const mount of mounts) {
    if (mount.type !== "ext4" || !mount.source.startsWith("/dev/loop")) continue;
    const owner = await readFile(join(mount.point, OWNER), "utf8").catch(() => "");
    if (owner === "" || !(await ownerGone(owner))) continue;
    await unmount(mount.point)
      .then(() => rm(mount.point, { recursive: true, force: true }))
      .catch(() => undefined);
  }
}

let support: Promise<string | undefined> | undefined;

/** Why /tmp and HOME cannot have a filesystem of their own here, or undefined; found out once. */
export function scratchDiskProblem(): Promise<string | undefined> {
  support ??= (async () => {
    if (process.getuid?.() !== 0) return "the worker is not root, so it cannot mount filesystems";
    let dir: string | undefined;
    try {
      dir = await mkdtemp(join(tmpdir(), "vmpilot-scratch-probe-"));
      const disk = await mountScratchDisk(dir, 1);
      await disk.unmount();
      return undefined;
    } catch (error) {
      const message = (error as Error).message.split("\n")[0] ?? "";
      const why = dir ? message.replaceAll(dir, "a probe directory") : message;
      return `a loop-mounted ext4 image could not be made (${why})`;
    } finally {
      if (dir) await rm(dir, { recursive: true, force: true });
    }
  })();
  return support;
}
