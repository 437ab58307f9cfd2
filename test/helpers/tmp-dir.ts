// Vitest globalSetup: the run's temporary files (os.tmpdir() in the tests and every process they
// start) on tmpfs when the machine has room there. They are thrown away, so a disk gains nothing;
// and on an ext4 without a journal, as this workplace's machines have, each new file's inode is
// looked for past recently deleted ones: git's and the tests' short-lived files made file creation
// some 4 % of the machine's CPU, and the run about a tenth slower.
import { existsSync, statfsSync } from "node:fs";
import { mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { isRunning } from "../../src/store/data-dir-lock.ts";

const TMPFS = "/dev/shm";
// Docker gives /dev/shm 64 MB; a run's checkouts, mirrors and scratch disks need more.
const MIN_FREE_BYTES = 4 * 1024 ** 3;
// Short: the CLI tests' sandbox sockets lie some 85 bytes deep in it, and a Unix socket's path
// stops at 108.
const PREFIX = "vmpt-";

/** Named for vitest's own process, which loads the config and runs this setup. */
const dir = join(TMPFS, `${PREFIX}${process.pid}`);

/** The run's TMPDIR, for vitest.config.ts; undefined leaves os.tmpdir() as it is. */
export function runTmpDir(): string | undefined {
  if (!existsSync(TMPFS)) return undefined;
  const free = statfsSync(TMPFS);
  return free.bavail * free.bsize >= MIN_FREE_BYTES ? dir : undefined;
}

export default async function setup() {
  if (!existsSync(TMPFS)) return;
  // Runs that died without their teardown leave theirs. As much of it as can go: a scratch disk
  // still mounted in it (a sandbox killed with its run) stays until the app's own sweep unmounts it.
  for (const name of await readdir(TMPFS)) {
    const pid = Number(name.startsWith(PREFIX) && name.slice(PREFIX.length));
    if (!pid || isRunning(pid)) continue;
    await rm(join(TMPFS, name), { recursive: true, force: true }).catch(() => undefined);
  }
  await mkdir(dir, { mode: 0o755 });
  return () => rm(dir, { recursive: true, force: true });
}
