import { lchown } from "node:fs/promises";
import { dirname } from "node:path";
import { launchAndCollect } from "../process/launcher.ts";

/** A host uid and gid that files in a checkout are handed to. */
export interface Owner {
  uid: number;
  gid: number;
}

/**
 * When the worker is root, sandboxed commands really run as "nobody": a user namespace made by
 * root maps to root, which still owns root's files.
 */
export const UNPRIVILEGED_OWNER: Owner = { uid: 65534, gid: 65534 };

/**
 * Gives the unprivileged sandbox user the paths it must write. `-h -P`: symbolic links themselves
 * change owner, never what they point to (a checkout may hold a link to /etc/shadow).
 */
export async function handOver(paths: readonly string[]): Promise<void> {
  const { uid, gid } = UNPRIVILEGED_OWNER;
  const result = await launchAndCollect({
    file: "chown",
    args: ["-R", "-h", "-P", `${uid}:${gid}`, "--", ...paths],
    cwd: "/",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    group: false,
  });
  if (result.code !== 0) throw new Error(`chown failed: ${result.stderr.trim()}`);
}

/** Hands over a path the worker wrote, and the directories it made for it below `from`. */
export async function handOverWritten(owner: Owner, path: string, made?: string): Promise<void> {
  await lchown(path, owner.uid, owner.gid);
  if (made === undefined) return;
  for (let dir = dirname(path); dir.length >= made.length; dir = dirname(dir)) {
    await lchown(dir, owner.uid, owner.gid);
    if (dir === made) break;
  }
}
