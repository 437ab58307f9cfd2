// The workspace agent's compiled code, lent read-only to every local sandbox. Inside one, Node's
// compile cache cannot be written, so each agent would strip and compile its TypeScript again:
// about half of the 0.45 s of CPU an agent's start costs.
import { createHash, randomUUID } from "node:crypto";
import { chmod, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { launchAndCollect } from "../process/launcher.ts";

const made = new Map<string, Promise<string | undefined>>();

/**
 * The directory under `base` to give the agent as NODE_COMPILE_CACHE, made once for these sources
 * and this Node by running the agent with no settings: it loads every module, refuses to start,
 * and Node writes their code as it exits. None when making it failed: the agent then compiles for
 * itself.
 */
export function agentCodeCache(
  /** A directory only the worker writes: beside its own compile cache, already trusted with code. */
  base: string,
  main: string,
  /** What the code depends on: files, and folders whose scripts are all read. */
  sources: readonly string[],
  flags: readonly string[],
  /** The uid the agent has in its sandbox, which names Node's cache directory. */
  uid: number,
): Promise<string | undefined> {
  const key = JSON.stringify([base, main, sources, flags, uid]);
  let cache = made.get(key);
  if (!cache) {
    cache = makeCache(base, main, sources, flags, uid).catch(() => undefined);
    made.set(key, cache);
  }
  return cache;
}

async function makeCache(
  base: string,
  main: string,
  sources: readonly string[],
  flags: readonly string[],
  uid: number,
): Promise<string> {
  // Under a shared /tmp, the folder may be another user's, who could swap the code agents run.
  const owner = await stat(base);
  if (owner.uid !== process.getuid?.() || (owner.mode & 0o022) !== 0) {
    throw new Error(`${base} is not the worker's own`);
  }
  const hash = createHash("sha256").update(`${process.version} ${flags.join(" ")} ${uid}\n`);
  for (const file of await sourceFiles(sources)) {
    hash.update(`${file}\n`).update(await readFile(file).catch(() => ""));
  }
  const dir = join(base, `vmpilot-agent-${hash.digest("hex").slice(0, 16)}`);
  // Only ever renamed in whole: one that is there is complete.
  if (await exists(dir)) return dir;
  // Made aside and renamed in, so an agent never sees half a cache (another worker process may
  // be making the same one).
  const partial = `${dir}.partial-${randomUUID()}`;
  try {
    const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", NODE_COMPILE_CACHE: partial };
    const args = [...flags, main];
    await launchAndCollect({ file: process.execPath, args, cwd: "/", env, group: false });
    const [written] = await readdir(partial);
    if (!written) throw new Error("node wrote no compile cache");
    // Node names it `<version>-<arch>-<hash>-<uid>` and reads the one of the agent's uid.
    const named = written.replace(/-\d+$/, `-${uid}`);
    if (named !== written) await rename(join(partial, written), join(partial, named));
    await readable(partial);
    await rename(partial, dir).catch(async (error: unknown) => {
      if (!(await exists(dir))) throw error;
    });
    return dir;
  } finally {
    await rm(partial, { recursive: true, force: true });
  }
}

/** `sources`' files and the TypeScript and JavaScript below its folders, in a stable order. */
async function sourceFiles(sources: readonly string[]): Promise<string[]> {
  const files: string[] = [];
  for (const source of sources) {
    const entries = await readdir(source, { recursive: true, withFileTypes: true }).catch(
      () => undefined,
    );
    if (!entries) {
      files.push(source);
      continue;
    }
    for (const entry of entries) {
      if (entry.isFile() && /\.[cm]?[jt]s$/.test(entry.name)) {
        files.push(join(entry.parentPath, entry.name));
      }
    }
  }
  return files.sort();
}

/** Node writes its cache for its own user only; the agent runs as another. */
async function readable(dir: string): Promise<void> {
  await chmod(dir, 0o755);
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    await chmod(join(entry.parentPath, entry.name), entry.isDirectory() ? 0o755 : 0o644);
  }
}

function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
