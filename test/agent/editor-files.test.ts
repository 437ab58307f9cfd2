import { execFileSync } from "node:child_process";
import { mkdir, symlink, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { editorTool } from "../../src/agent/tools/editor.ts";
import type { AgentTool } from "../../src/agent/tools/types.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

let repo: TestRepo;
let editor: AgentTool;

beforeEach(async () => {
  repo = await makeRepo({ "ok.txt": "fine\n" });
  editor = editorTool(repo.workspace, { maxFileBytes: 10_000 });
});

afterEach(async () => {
  await repo.cleanup();
});

function edit(input: Record<string, unknown>) {
  return editor.run(input, { remainingMs: 60_000 });
}

describe("editor: files it must not read", () => {
  it("refuses a FIFO at once, and other reads still complete while FIFOs are asked for", async () => {
    execFileSync("mkfifo", [join(repo.root, "pipe")]);
    // More FIFO views than libuv has threads: a blocking open would starve the ok.txt read.
    const pipes = Array.from({ length: 6 }, () => edit({ command: "view", path: "pipe" }));
    expect(await edit({ command: "view", path: "ok.txt" })).toMatchObject({ isError: false });
    for (const result of await Promise.all(pipes)) {
      expect(result).toEqual({ isError: true, content: "pipe is not a regular file (a FIFO)." });
    }
    await expect(repo.workspace.writeFile("pipe", "x")).rejects.toMatchObject({ code: "ENXIO" });
    // Writing would block on the FIFO just as reading did.
    expect(await edit({ command: "create", path: "pipe", file_text: "x" })).toEqual({
      isError: true,
      content: "pipe is not a regular file (a FIFO).",
    });
  });

  it("refuses a sparse 1.9 GB file by its size, without reading it", async () => {
    await writeFile(join(repo.root, "huge.bin"), "");
    await truncate(join(repo.root, "huge.bin"), 1_900_000_000);
    const before = process.memoryUsage().rss;
    const result = await edit({ command: "view", path: "huge.bin" });
    expect(process.memoryUsage().rss - before).toBeLessThan(100 * 1024 * 1024);
    expect(result.isError).toBe(true);
    expect(result.content).toContain(`huge.bin is 1900000000 bytes, over the 10000-byte limit.`);
  });

  it("refuses a device file inside the checkout and a symlink to /dev/zero", async () => {
    execFileSync("mknod", [join(repo.root, "zero"), "c", "1", "5"]);
    await symlink("/dev/zero", join(repo.root, "zero-link"));
    expect(await edit({ command: "view", path: "zero" })).toEqual({
      isError: true,
      content: "zero is not a regular file (a character device).",
    });
    const link = await edit({ command: "view", path: "zero-link" });
    expect(link.isError).toBe(true);
    expect(link.content).toContain("outside the workspace");
  });

  it("names paths relative to the checkout, never the host path or the worker's pid", async () => {
    await mkdir(join(repo.root, "dir"));
    await symlink("/etc/hostname", join(repo.root, "dir/out"));
    await symlink("loop", join(repo.root, "loop"));
    await symlink("/proc/self", join(repo.root, "proc"));
    const results = [
      await edit({ command: "view", path: "../elsewhere.txt" }),
      await edit({ command: "view", path: "/etc/hostname" }),
      await edit({ command: "view", path: "dir/out" }),
      await edit({ command: "view", path: "loop" }),
      await edit({ command: "create", path: "ok.txt/child", file_text: "x" }),
      await edit({ command: "view", path: "proc/environ" }),
    ];
    for (const result of results) {
      expect(result.isError).toBe(true);
      expect(result.content).not.toContain(repo.root);
      expect(result.content).not.toContain(String(process.pid));
    }
  });
});
