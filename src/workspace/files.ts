import { mkdir, readdir } from "node:fs/promises";
import { dirname } from "node:path";
import { resolveInside } from "./paths.ts";
import { copyCapped, readCapped, writeRegular } from "./read-capped.ts";
import { handOverWritten, type Owner } from "./sandbox/owner.ts";
import type { Workspace } from "./types.ts";

type FileOps = Pick<Workspace, "readFile" | "copyOut" | "writeFile" | "listDir">;

/**
 * File operations done by the worker directly on the checkout, guarded by path containment.
 * Both providers use them: the sandbox's writable root is the same directory. With `owner`, what
 * the worker writes is handed to that user, so sandboxed commands can change it later.
 */
export function fileOps(root: string, owner?: Owner): FileOps {
  return {
    async readFile(path, maxBytes) {
      return readCapped(await resolveInside(root, path), path, maxBytes);
    },
    async copyOut(path, dest, maxBytes) {
      await copyCapped(await resolveInside(root, path), path, dest, maxBytes);
    },
    async writeFile(path, data) {
      const target = await resolveInside(root, path);
      const made = await mkdir(dirname(target), { recursive: true });
      await writeRegular(target, path, data);
      if (owner) await handOverWritten(owner, target, made);
    },
    async listDir(path) {
      const entries = await readdir(await resolveInside(root, path), { withFileTypes: true });
      return entries.map((e) => (e.isDirectory() ? `${e.name}/` : e.name)).sort();
    },
  };
}
