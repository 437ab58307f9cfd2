// A worker that dies (SIGKILL, a crash) leaves its jobs' cgroups and scratch disks behind. Each is
// tagged with its worker's pid namespace and pid, and removed by the next worker process that
// starts here once that pid is gone. Tags of another pid namespace are left alone: their pids say
// nothing here.
import { readlink } from "node:fs/promises";

let tag: Promise<string> | undefined;

/** `<pid namespace>-<pid>` of this process. */
export function ownerTag(): Promise<string> {
  tag ??= readlink("/proc/self/ns/pid").then(
    (ns) => `${ns.replace(/\D/g, "")}-${process.pid}`,
    () => `0-${process.pid}`,
  );
  return tag;
}

/** Whether `owner` (an ownerTag) names a process of this pid namespace that is gone. */
export async function ownerGone(owner: string): Promise<boolean> {
  const [ns, pid] = owner.split("-");
  if (ns === undefined || pid === undefined || `${ns}-${process.pid}` === owner) return false;
  if (!(await ownerTag()).startsWith(`${ns}-`)) return false;
  try {
    process.kill(Number(pid), 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}
