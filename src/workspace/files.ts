import { mkdir, readdir } from "node:fs/promises";
import { dirname } from "node:path";
import { resolveInside } from "./paths.ts";
import { readCapped, writeRegular } from "./read-capped.ts";
import type { Workspace } from "./types.ts";

type FileOps = Pick<Workspace, "readFile" | "writeFile" | "listDir">;

/**
 * File operations done by the worker directly on the checkout, guarded by path containment.
 * Both providers use them: the sandbox's writable root is the same directory.
 */
export function fileOps(root: string): FileOps {
  return {
    async readFile(path, maxBytes) {
      return readCapped(await resolveInside(root, path), path, maxBytes);
    },
    async writeFile(path, data) {
      const target = await resolveInside(root, path);
      await mkdir(dirname(target), { recursive: true });
      await writeRegular(target, path, data);
    },
    async listDir(path) {
      const entries = await readdir(await resolveInside(root, path), { withFileTypes: true });
      return entries.map((e) => (e.isDirectory() ? `${e.name}/` : e.name)).sort();
    },
  };
}
