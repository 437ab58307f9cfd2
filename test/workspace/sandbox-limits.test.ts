import { mkdtemp, realpath, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Workspace } from "../../src/workspace/types.ts";
import { recordingLogger } from "./helpers.ts";
import { LOCAL_PROVIDERS, openWorkspace } from "./providers.ts";

const limits = { processes: 64, memoryMb: 512, fileMb: 8, diskMb: 16 };

describe.each(LOCAL_PROVIDERS)("the %s provider", (provider) => {
  const logger = recordingLogger();
  let root: string;
  let workspace: Workspace;

  beforeAll(async () => {
    root = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-limits-")));
    workspace = await openWorkspace(provider, root, { limits, logger });
  });

  afterAll(async () => {
    await workspace.dispose();
    await rm(root, { recursive: true, force: true });
  });

  describe("limits", () => {
    it("stops a file at the size limit and says so", async () => {
      const result = await workspace.exec("head -c 20M /dev/zero > big.bin");
      expect(result.exitCode).not.toBe(0);
      expect(result.stderr).toContain("size limit of 8 MB (SANDBOX_MAX_FILE_MB)");
      expect((await stat(join(root, "big.bin"))).size).toBeLessThanOrEqual(8 * 1024 * 1024);
      await workspace.exec("rm big.bin");
    });

    it("refuses an allocation over the memory limit and says so", async () => {
      const result = await workspace.exec('python3 -c "b = bytearray(1024 * 1024 * 1024)"');
      expect(result.exitCode).not.toBe(0);
      expect(result.stderr).toContain("MemoryError");
      expect(result.stderr).toContain("memory limit of 512 MB per process (SANDBOX_MAX_MEMORY_MB)");
    });

    it("refuses processes over the limit and says so", async () => {
      const script = [
        "import os, time",
        "for _ in range(1000):",
        "    if os.fork() == 0:",
        "        time.sleep(60)",
        "        os._exit(0)",
      ].join("\n");
      const result = await workspace.exec(`python3 -c '${script}'`);
      expect(result.exitCode).not.toBe(0);
      expect(result.stderr).toContain("Resource temporarily unavailable");
      expect(result.stderr).toContain("limit of 64 processes and threads (SANDBOX_MAX_PROCESSES)");
    });

    it("cannot raise its limits again", async () => {
      const result = await workspace.exec("ulimit -f unlimited && echo raised");
      expect(result.stdout).not.toContain("raised");
    });

    it("stops a command that fills the disk past the limit", async () => {
      const fill = "for i in 1 2 3 4 5 6 7 8 9; do head -c 2M /dev/zero > fill-$i; done; sleep 60";
      const result = await workspace.exec(fill, { timeoutMs: 60_000 });
      expect(result.timedOut).toBe(false);
      expect(result.exitCode).toBeNull();
      expect(result.stderr).toMatch(/uses \d+ MB of disk, over its limit of 16 MB/);
      expect(result.stderr).toContain("the command was stopped");
      expect(logger.lines.some((line) => line.level === "warn")).toBe(true);
    });

    it("measures the disk before a new workspace's first command", async () => {
      const fresh = await openWorkspace(provider, root, { limits });
      try {
        const result = await fresh.exec("head -c 1M /dev/zero > more");
        expect(result.exitCode).not.toBe(0);
        expect(result.stderr).toMatch(
          /over its limit of 16 MB \(SANDBOX_MAX_DISK_MB\), so this command could not write files/,
        );
        await fresh.exec("rm fill-* more");
      } finally {
        await fresh.dispose();
      }
    });
  });
});
