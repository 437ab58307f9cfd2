import { accessSync, constants, statSync } from "node:fs";
import { join } from "node:path";

const found = new Map<string, string>();

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/**
 * The absolute path of a program on `path` (default the worker's PATH), looked up once: started
 * by name, each start would try every directory before its own in turn, an execve that fails for
 * each. The name itself when none has it, for the start to fail as it would have.
 */
export function programPath(name: string, path = process.env.PATH ?? "/usr/bin:/bin"): string {
  const key = `${name}\0${path}`;
  let program = found.get(key);
  if (program === undefined) {
    const dirs = path.split(":").filter((dir) => dir !== "");
    program = dirs.map((dir) => join(dir, name)).find(isExecutable) ?? name;
    found.set(key, program);
  }
  return program;
}
