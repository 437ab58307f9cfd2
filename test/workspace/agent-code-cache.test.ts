// The workspace agent's compiled code, made once by the worker and read, never written, by agents.
import { spawnSync } from "node:child_process";
import { chmod, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentCodeCache } from "../../src/workspace/agent/code-cache.ts";

const SRC = join(import.meta.dirname, "../../src");
const MAIN = join(SRC, "workspace/agent/main.ts");

/** What Node's compile cache says it did for each module the agent loads. */
function loadAgent(cache: string): string[] {
  const started = spawnSync(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH, NODE_COMPILE_CACHE: cache, NODE_DEBUG_NATIVE: "COMPILE_CACHE" },
    encoding: "utf8",
  });
  expect(started.status).toBe(2); // No settings: the agent refuses to start, its modules loaded.
  return started.stderr.split("\n").filter((line) => line.includes("file:///"));
}

describe("the workspace agent's code cache", () => {
  let base: string;
  beforeAll(async () => {
    base = await mkdtemp(join(tmpdir(), "vmpilot-code-cache-"));
  });
  afterAll(() => rm(base, { recursive: true, force: true }));

  it("holds every module the agent loads, readable by the agent's uid, named for it", async () => {
    const uid = process.getuid?.() ?? 0;
    const cache = await agentCodeCache(base, MAIN, [SRC], [], uid);
    expect(cache).toMatch(/\/vmpilot-agent-[0-9a-f]{16}$/);
    const [named] = await readdir(cache as string);
    expect(named).toMatch(new RegExp(`^v\\d+\\.\\d+\\.\\d+-.+-${uid}$`));
    const entries = await readdir(join(cache as string, named as string));
    expect(entries.length).toBeGreaterThan(10);
    for (const entry of entries) {
      expect((await stat(join(cache as string, named as string, entry))).mode & 0o777).toBe(0o644);
    }
    const lines = loadAgent(cache as string);
    expect(lines).toContainEqual(
      expect.stringMatching(/V8 code cache for ESM .*\/agent\/main\.ts was accepted/),
    );
    // Every module's code was there already: nothing new would be written.
    const persisted = lines.filter((line) => line.includes("persisting"));
    expect(persisted.length).toBeGreaterThan(20);
    expect(persisted.filter((line) => !line.includes("because cache was the same"))).toEqual([]);
    // Asked again, the same directory, made once.
    expect(await agentCodeCache(base, MAIN, [SRC], [], uid)).toBe(cache);
  });

  it("is named for the uid the agent runs as, and made anew when a source changes", async () => {
    const project = await mkdtemp(join(base, "project-"));
    const main = join(project, "main.mjs");
    await writeFile(main, 'import "./part.mjs";\nprocess.exit(2);\n');
    await writeFile(join(project, "part.mjs"), "export const part = 1;\n");
    const first = await agentCodeCache(base, main, [project], [], 1000);
    expect(await readdir(first as string)).toEqual([expect.stringMatching(/-1000$/)]);
    await writeFile(join(project, "part.mjs"), "export const part = 2;\n");
    const changed = await agentCodeCache(base, main, [project, join(project, "x")], [], 1000);
    expect(changed).not.toBe(first);
    expect(await readdir(changed as string)).toEqual([expect.stringMatching(/-1000$/)]);
  });

  it("is made nowhere another user may write: the agent then compiles for itself", async () => {
    const shared = await mkdtemp(join(base, "shared-"));
    await chmod(shared, 0o777);
    expect(await agentCodeCache(shared, MAIN, [SRC], [], 1000)).toBeUndefined();
    expect(await readdir(shared)).toEqual([]);
  });
});
