import { mkdir, mkdtemp, readFile, realpath, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PathEscapeError } from "../../src/workspace/paths.ts";
import { createHostWorkspace } from "../../src/workspace/sandbox/host.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { isAlive, recordingLogger, waitUntil } from "./helpers.ts";

let root: string;
let workspace: Workspace;
let logger: ReturnType<typeof recordingLogger>;

beforeEach(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-host-")));
  logger = recordingLogger();
  workspace = createHostWorkspace(root, { logger });
});

afterEach(async () => {
  await workspace.dispose();
  await rm(root, { recursive: true, force: true });
});

describe("host workspace", () => {
  it("warns that it has no isolation", () => {
    expect(workspace).toMatchObject({ isolation: "none", engine: "local" });
    expect(logger.lines.some((l) => l.level === "warn")).toBe(true);
  });

  it("runs bash in the root and reports output and exit code", async () => {
    const result = await workspace.exec("pwd; echo oops >&2; exit 3");
    expect(result.stdout).toBe(`${root}\n`);
    expect(result.stderr).toBe("oops\n");
    expect(result.exitCode).toBe(3);
    expect(result.timedOut).toBe(false);
    expect(result.truncated).toBe(false);
  });

  it("runs in a cwd relative to the root, and refuses one outside", async () => {
    await mkdir(join(root, "sub"));
    expect((await workspace.exec("pwd", { cwd: "sub" })).stdout).toBe(`${join(root, "sub")}\n`);
    await expect(workspace.exec("pwd", { cwd: "../.." })).rejects.toBeInstanceOf(PathEscapeError);
  });

  it("does not pass the worker's secrets to commands", async () => {
    process.env.GITHUB_TOKEN = "ghs_host_secret";
    process.env.ANTHROPIC_API_KEY = "sk-ant-host-secret";
    try {
      const result = await workspace.exec("env", { env: { EXTRA: "yes" } });
      expect(result.stdout).not.toContain("secret");
      expect(result.stdout).toContain("EXTRA=yes");
      expect(result.stdout).toContain("CI=1");
    } finally {
      delete process.env.GITHUB_TOKEN;
      delete process.env.ANTHROPIC_API_KEY;
    }
  });

  it("refuses extra variables that look like credentials", async () => {
    await expect(workspace.exec("true", { env: { NPM_TOKEN: "x" } })).rejects.toThrow(/NPM_TOKEN/);
  });

  it("caps output for the model and keeps the full output", async () => {
    const result = await workspace.exec(
      "echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END",
    );
    expect(result.truncated).toBe(true);
    expect(result.stdout.length).toBeLessThanOrEqual(30_000);
    expect(result.stdout).toMatch(/^START\n/);
    expect(result.stdout).toMatch(/END\n$/);
    expect(result.stdout).toMatch(/\[\.\.\. \d+ characters cut \.\.\.\]/);
    expect(result.fullStdout.length).toBe(100_011);
  });

  it("kills the whole process tree on timeout", async () => {
    const result = await workspace.exec(
      "sleep 1000 & echo $! > child.pid; (sleep 1000 & echo $! > grandchild.pid; wait) & wait",
      { timeoutMs: 300 },
    );
    expect(result.timedOut).toBe(true);
    expect(result.exitCode).toBeNull();
    const pids = await Promise.all(
      ["child.pid", "grandchild.pid"].map(async (f) =>
        Number(await readFile(join(root, f), "utf8")),
      ),
    );
    for (const pid of pids) {
      expect(await waitUntil(async () => !(await isAlive(pid)))).toBe(true);
    }
  });

  it("kills background children once the command itself exits", async () => {
    const result = await workspace.exec("sleep 1000 >/dev/null 2>&1 & echo $!");
    const pid = Number(result.stdout.trim());
    expect(await waitUntil(async () => !(await isAlive(pid)))).toBe(true);
  });

  it("kills the tree when aborted", async () => {
    const controller = new AbortController();
    const running = workspace.exec("sleep 1000 & echo $! > child.pid; wait", {
      signal: controller.signal,
    });
    await waitUntil(
      async () => (await readFile(join(root, "child.pid"), "utf8").catch(() => "")) !== "",
    );
    controller.abort();
    const result = await running;
    expect(result.exitCode).toBeNull();
    expect(result.timedOut).toBe(false);
    const pid = Number(await readFile(join(root, "child.pid"), "utf8"));
    expect(await waitUntil(async () => !(await isAlive(pid)))).toBe(true);
  });

  it("reads, writes and lists files inside the root only", async () => {
    await workspace.writeFile("a/b.txt", "hello");
    expect((await workspace.readFile("a/b.txt", 100)).toString()).toBe("hello");
    expect(await workspace.listDir(".")).toEqual(["a/"]);
    expect(await workspace.listDir("a")).toEqual(["b.txt"]);
    await symlink("/etc", join(root, "etc"));
    await expect(workspace.readFile("etc/passwd", 100)).rejects.toBeInstanceOf(PathEscapeError);
    await expect(workspace.writeFile("../x", "no")).rejects.toBeInstanceOf(PathEscapeError);
    await expect(workspace.readFile("/etc/hostname", 100)).rejects.toBeInstanceOf(PathEscapeError);
  });
});
