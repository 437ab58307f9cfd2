// The checkout on the job's disk: the kernel, not a measurement after the fact, holds the checkout
// to the disk limit and its inode count, however fast a command writes and whatever it writes
// with (issue 30, item 1).
import { execFileSync } from "node:child_process";
import { statfsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkoutDiskMb } from "../../src/workspace/factory.ts";
import { prepareCheckout } from "../../src/workspace/git/checkout.ts";
import { sparesSettled } from "../../src/workspace/git/spares.ts";
import { kernelSupport, limitEnforcement } from "../../src/workspace/sandbox/limits.ts";
import { diskInodes, mountScratchDisk } from "../../src/workspace/sandbox/scratch-disk.ts";
import { commitFile, mountedAt } from "./helpers.ts";
import { LOCAL_PROVIDERS, type LocalProvider, openWorkspace } from "./providers.ts";

const { scratchProblem } = await kernelSupport();
const MIB = 1024 * 1024;
const limits = { processes: 64, memoryMb: 512, fileMb: 8, diskMb: 40 };
const cleanup: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** A workspace on a checkout made as a job makes it: on the job's disk, when there is one. */
async function open(provider: LocalProvider, fileMb = limits.fileMb) {
  const base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-checkout-disk-")));
  cleanup.push(() => rm(base, { recursive: true, force: true }));
  const own = { ...limits, fileMb };
  const diskMb = await checkoutDiskMb({ engine: "local", isolation: "sandbox" }, own);
  const disk = diskMb === undefined ? undefined : await mountScratchDisk(base, diskMb);
  let mounted = disk !== undefined;
  /** Once: the test may unmount first to see it go. */
  const unmount = async () => {
    if (mounted) await disk?.unmount();
    mounted = false;
  };
  cleanup.push(unmount);
  const root = join(base, "repo");
  await mkdir(root);
  const stateDir = join(base, "state");
  await mkdir(stateDir);
  const workspace = await openWorkspace(provider, root, { limits: own, stateDir, disk });
  cleanup.push(() => workspace.dispose());
  return { workspace, root, base, unmount };
}

/** Megabytes the checkout's files hold on disk, as `du` counts blocks (kept-size ones included). */
async function checkoutMb(workspace: Awaited<ReturnType<typeof open>>["workspace"]) {
  const du = await workspace.exec("du -s -m .");
  return Number(du.stdout.split("\t")[0]);
}

describe.each(LOCAL_PROVIDERS)("the %s provider", (provider) => {
  describe("the checkout on the job's disk", () => {
    it("is a filesystem of the disk limit's size, which its opener unmounts", async ({ skip }) => {
      skip(scratchProblem !== undefined, `this machine cannot: ${scratchProblem}`);
      const { workspace, root, base, unmount } = await open(provider);
      expect(await mountedAt(base)).toBe(true);
      const fs = statfsSync(root);
      expect(fs.blocks * fs.bsize).toBeLessThanOrEqual(limits.diskMb * MIB);
      expect(fs.files).toBeLessThanOrEqual(diskInodes(limits.diskMb) * 1.1);
      await workspace.dispose();
      expect(await mountedAt(base)).toBe(true);
      await unmount();
      expect(await mountedAt(base)).toBe(false);
    });

    it("stops fallocate of many files at the limit, within the command", async ({ skip }) => {
      skip(scratchProblem !== undefined, `this machine cannot: ${scratchProblem}`);
      const { workspace } = await open(provider);
      const script = [
        "import os",
        "for i in range(20):",
        '    os.posix_fallocate(os.open(f"fa{i}", os.O_CREAT | os.O_WRONLY), 0, 8 << 20)',
        'print("allocated it all")',
      ].join("\n");
      const result = await workspace.exec(`python3 -c '${script}'`);
      expect(result.stdout).not.toContain("allocated it all");
      expect(result.stderr).toContain("No space left on device");
      expect(await checkoutMb(workspace)).toBeLessThanOrEqual(limits.diskMb);
    });

    it("stops fallocate --keep-size, which the file size limit does not see", async ({ skip }) => {
      skip(scratchProblem !== undefined, `this machine cannot: ${scratchProblem}`);
      const { workspace } = await open(provider);
      const result = await workspace.exec(": > k1 && fallocate -n -l 200M k1");
      expect(result.exitCode).not.toBe(0);
      expect(result.stderr).toContain("No space left on device");
      expect(await checkoutMb(workspace)).toBeLessThanOrEqual(limits.diskMb);
    });

    it("stops writes to a file held only by a mapping, closed and deleted", async ({ skip }) => {
      skip(scratchProblem !== undefined, `this machine cannot: ${scratchProblem}`);
      const { workspace } = await open(provider, 128);
      // mmap(2) itself: Python's mmap module keeps a descriptor of its own, which the meter sees.
      const script = [
        "import ctypes, os",
        "libc = ctypes.CDLL(None)",
        "libc.mmap.restype = ctypes.c_void_p",
        "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t] + [ctypes.c_int] * 3 + [ctypes.c_long]",
        "size = 100 << 20",
        'fd = os.open("m", os.O_CREAT | os.O_RDWR)',
        "os.ftruncate(fd, size)",
        "held = libc.mmap(None, size, 3, 1, fd, 0)",
        "os.close(fd)",
        'os.unlink("m")',
        "ctypes.memset(held, 1, size)",
        'print("held it all")',
      ].join("\n");
      const result = await workspace.exec(`python3 -c '${script}'`);
      expect(result.stdout).not.toContain("held it all");
      expect(result.exitCode).not.toBe(0);
    });

    it("stops a flood of empty files at the disk's inode count", async ({ skip }) => {
      skip(scratchProblem !== undefined, `this machine cannot: ${scratchProblem}`);
      const { workspace } = await open(provider);
      const script = [
        "import os",
        "made = 0",
        "try:",
        "    for i in range(200000):",
        '        os.close(os.open(f"e{i}", os.O_CREAT | os.O_WRONLY))',
        "        made += 1",
        "except OSError as error:",
        "    print(made, error.strerror)",
      ].join("\n");
      const result = await workspace.exec(`python3 -c '${script}'`, { timeoutMs: 60_000 });
      const [made, ...why] = result.stdout.trim().split(" ");
      expect(why.join(" ")).toBe("No space left on device");
      expect(Number(made)).toBeLessThanOrEqual(diskInodes(limits.diskMb));
    });

    it("stops a plain write past the limit before it lands", async ({ skip }) => {
      skip(scratchProblem !== undefined, `this machine cannot: ${scratchProblem}`);
      const { workspace } = await open(provider, 100);
      const result = await workspace.exec("head -c 80M /dev/zero > big");
      expect(result.exitCode).not.toBe(0);
      expect(result.stderr).toContain("No space left on device");
      expect(await checkoutMb(workspace)).toBeLessThanOrEqual(limits.diskMb);
    });
  });
});

describe("a spare checkout on a disk", () => {
  it("is claimed with its disk, mounted where the job's goes, and moved to the current base", async ({
    skip,
  }) => {
    skip(scratchProblem !== undefined, `this machine cannot: ${scratchProblem}`);
    const base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-spare-disk-")));
    cleanup.push(() => rm(base, { recursive: true, force: true }));
    const source = join(base, "source");
    await mkdir(source);
    execFileSync("git", ["init", "-q", "-b", "main"], { cwd: source });
    commitFile(source, "README.md", "first\n");
    const dataDir = join(base, "data");
    const checkOut = async (name: string) => {
      const dir = join(base, name);
      await mkdir(dir);
      const options = { dataDir, repo: source, dest: join(dir, "repo"), branch: name };
      const checkout = await prepareCheckout({ ...options, keepSpare: true, diskMb: 40 });
      cleanup.push(async () => checkout.disk?.unmount());
      await sparesSettled();
      return { dir, checkout };
    };
    const first = await checkOut("job-1");
    expect(first.checkout.fromSpare).toBe(false);
    expect(await mountedAt(first.dir)).toBe(true);
    commitFile(source, "LATEST.md", "newer than the spare\n");
    const { dir, checkout } = await checkOut("job-2");
    expect(checkout.fromSpare).toBe(true);
    expect(await mountedAt(dir)).toBe(true);
    const fs = statfsSync(checkout.root);
    expect(fs.blocks * fs.bsize).toBeLessThanOrEqual(40 * MIB);
    const git = (...args: string[]) =>
      execFileSync("git", args, { cwd: checkout.root, encoding: "utf8" }).trim();
    expect(git("branch", "--show-current")).toBe("job-2");
    expect(git("status", "--porcelain")).toBe("");
    expect(await readFile(join(checkout.root, "LATEST.md"), "utf8")).toBe("newer than the spare\n");
  });
});

it("says which holds the checkout's disk limit: the kernel, or a measurement", async () => {
  const { disk } = await limitEnforcement();
  if (scratchProblem === undefined) expect(disk).toMatch(/^kernel: the checkout, \/tmp and HOME/);
  else expect(disk).toMatch(/^best effort: measured before, during and after commands/);
});
