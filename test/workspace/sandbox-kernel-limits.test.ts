import { mkdir, mkdtemp, realpath, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { kernelSupport } from "../../src/workspace/sandbox/limits.ts";
import { jobCgroupDirs, mountedAt } from "./helpers.ts";
import { LOCAL_PROVIDERS, type LocalProvider, openWorkspace } from "./providers.ts";

// What this machine allows: a test that needs more is skipped, saying why.
const kernel = await kernelSupport();
const missing = {
  memory: kernel.cgroups.problems.memory,
  pids: kernel.cgroups.problems.pids,
  anyCgroup:
    kernel.cgroups.memory || kernel.cgroups.pids
      ? undefined
      : JSON.stringify(kernel.cgroups.problems),
  scratch: kernel.scratchProblem,
};
type Skip = (condition: boolean, note?: string) => void;
const requires = (skip: Skip, what: keyof typeof missing) =>
  skip(missing[what] !== undefined, `this machine cannot: ${missing[what]}`);

const small = { processes: 64, memoryMb: 512, fileMb: 16, diskMb: 8 };
const cleanup: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup.length = 0;
});

/** A workspace on a fresh checkout, with its state directory where the test can see it. */
async function open(provider: LocalProvider, limits = small) {
  const base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-kernel-limits-")));
  cleanup.push(() => rm(base, { recursive: true, force: true }));
  const root = join(base, "repo");
  const stateDir = join(base, "state");
  await mkdir(root);
  await mkdir(stateDir);
  const workspace = await openWorkspace(provider, root, { limits, stateDir });
  // Disposing twice is a no-op: tests may dispose first to see what is left.
  cleanup.push(() => workspace.dispose());
  return { workspace, root, stateDir };
}

describe.each(LOCAL_PROVIDERS)("the %s provider", (provider) => {
  describe("limits the kernel enforces", () => {
    it("stops a job whose processes together hold more memory than the limit, memfds included", async ({
      skip,
    }) => {
      requires(skip, "memory");
      // The job's cgroup holds the agent too (about 100 MB of Node), and its commands.
      const memoryMb = provider === "agent" ? 256 : 32;
      const { workspace } = await open(provider, { ...small, memoryMb, fileMb: 1024 });
      const script = [
        "import os",
        'fd = os.memfd_create("held")',
        `for _ in range(${2 * memoryMb}):`,
        '    os.write(fd, b"\\0" * (1 << 20))',
        'print("held it all")',
      ].join("\n");
      const result = await workspace.exec(`python3 -c '${script}'`);
      expect(result.stdout).not.toContain("held");
      expect(result.exitCode).not.toBe(0);
      expect(result.stderr).toContain(`memory limit of ${memoryMb} MB (SANDBOX_MAX_MEMORY_MB)`);
      // The kernel took the command's process, not the agent's: the workspace still works.
      expect((await workspace.exec("echo on")).stdout).toBe("on\n");
    });

    it("holds the TCP buffers of loopback connections nobody reads within the memory limit", async ({
      skip,
    }) => {
      requires(skip, "memory");
      const memoryMb = provider === "agent" ? 256 : 64;
      const { workspace } = await open(provider, { ...small, memoryMb, fileMb: 1024 });
      // Writes until each connection's buffers are full, and stops at twice the limit, which
      // without a limit on TCP buffers it reaches. With one, each connection still gets its
      // minimum send buffer, some tens of KB.
      const script = [
        "import socket",
        `cap = ${2 * memoryMb} << 20`,
        "server = socket.socket()",
        'server.bind(("127.0.0.1", 0))',
        "server.listen(200)",
        'held, total, chunk = [], 0, b"\\0" * (1 << 16)',
        "while len(held) < 400 and total < cap:",
        "    sender = socket.create_connection(server.getsockname())",
        "    held += [sender, server.accept()[0]]",
        "    sender.setblocking(False)",
        "    try:",
        "        while total < cap:",
        "            total += sender.send(chunk)",
        "    except BlockingIOError:",
        "        pass",
        'print("held", total >> 20)',
      ].join("\n");
      const result = await workspace.exec(`python3 -c '${script}'`);
      const held = Number(/^held (\d+)$/m.exec(result.stdout)?.[1] ?? 0);
      expect(held).toBeLessThan(1.5 * memoryMb);
      expect((await workspace.exec("echo on")).stdout).toBe("on\n");
    });

    it("says the job reached its process limit even when the command hides why", async ({
      skip,
    }) => {
      requires(skip, "pids");
      const { workspace } = await open(provider);
      const script = [
        "import os, sys, time",
        "try:",
        "    for _ in range(200):",
        "        if os.fork() == 0:",
        "            time.sleep(30)",
        "            os._exit(0)",
        "except OSError:",
        "    sys.exit(3)",
      ].join("\n");
      const result = await workspace.exec(`python3 -c '${script}'`);
      expect(result.exitCode).toBe(3);
      expect(result.stderr).toContain("limit of 64 processes and threads (SANDBOX_MAX_PROCESSES)");
    });

    it("runs commands in a cgroup of the job's own, removed with the workspace", async ({
      skip,
    }) => {
      requires(skip, "anyCgroup");
      const { workspace } = await open(provider);
      const dirs = await jobCgroupDirs((await workspace.exec("cat /proc/self/cgroup")).stdout);
      expect(dirs.length).toBeGreaterThan(0);
      for (const dir of dirs) await expect(stat(dir)).resolves.toBeDefined();
      await workspace.dispose();
      for (const dir of dirs) await expect(stat(dir)).rejects.toThrow(/ENOENT/);
    });

    it("keeps /tmp and HOME within the disk limit", async ({ skip }) => {
      requires(skip, "scratch");
      const { workspace, stateDir } = await open(provider);
      expect(await mountedAt(stateDir)).toBe(true);
      const result = await workspace.exec("head -c 12M /dev/zero > /tmp/big");
      expect(result.exitCode).not.toBe(0);
      expect(result.stderr).toContain("No space left on device");
      expect(result.stderr).toContain("(SANDBOX_MAX_DISK_MB)");
      const home = await workspace.exec("head -c 12M /dev/zero > ~/big");
      expect(home.exitCode).not.toBe(0);
      await workspace.dispose();
      expect(await mountedAt(stateDir)).toBe(false);
    });

    it("counts files deleted while a command holds them open", async ({ skip }) => {
      requires(skip, "anyCgroup");
      const { workspace } = await open(provider);
      const held = "exec 3>held && rm held && head -c 12M /dev/zero >&3 && sleep 30";
      const result = await workspace.exec(held, { timeoutMs: 20_000 });
      expect(result.timedOut).toBe(false);
      expect(result.stderr).toMatch(/uses \d+ MB of disk, over its limit of 8 MB/);
      expect(result.stderr).toContain("the command was stopped");
    });
  });

  describe("disk limit between commands", () => {
    it("lets no command grow a workspace a quick command took over the limit, until space is freed", async () => {
      const { workspace, root } = await open(provider);
      const over = await workspace.exec("head -c 6M /dev/zero > a && head -c 6M /dev/zero > b");
      // Quick enough, it ends before the meter looks; on a busy machine the meter stops it as it
      // grows. Either way the files stay, and what follows is the same.
      if (over.exitCode !== 0) expect(over.stderr).toContain("the command was stopped");
      const refused = await workspace.exec("head -c 1M /dev/zero > c");
      expect(refused.exitCode).not.toBe(0);
      // The command that went over says so, unless files freed elsewhere on the filesystem hid
      // its growth from the quick look (limit-guard.test.ts); the next one always does.
      expect(`${over.stderr}${refused.stderr}`).toMatch(
        /uses \d+ MB of disk, over its limit of 8 MB \(SANDBOX_MAX_DISK_MB\)/,
      );
      expect(refused.stderr).toContain("over its limit of 8 MB");
      expect((await stat(join(root, "c"))).size).toBe(0);
      const freed = await workspace.exec("rm a b");
      expect(freed.exitCode).toBe(0);
      const again = await workspace.exec("head -c 1M /dev/zero > c");
      expect(again.exitCode).toBe(0);
      expect(again.stderr).toBe("");
      expect((await stat(join(root, "c"))).size).toBe(1024 * 1024);
    });
  });
});
