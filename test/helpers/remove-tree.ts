// Removes a test's directory after a worker process was killed: a job's disk (a loop-mounted
// filesystem under the worker's data dir) may still be mounted there, since the job ends before its
// workspace is disposed, and a killed worker unmounts nothing. The next worker's start would sweep
// it; a test that starts none unmounts it here.
import { execFile } from "node:child_process";
import { readFile, rm } from "node:fs/promises";
import { promisify } from "node:util";

export async function removeTree(dir: string): Promise<void> {
  const mounts = (await readFile("/proc/self/mountinfo", "utf8").catch(() => ""))
    .split("\n")
    .map((line) => line.split(" ")[4] ?? "")
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
  for (const point of mounts) {
    await promisify(execFile)("umount", ["-l", point]).catch(() => undefined);
  }
  await rm(dir, { recursive: true, force: true });
}
