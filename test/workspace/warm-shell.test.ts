// The workspace agent's shell started ahead: a command must not be able to tell it from a cold
// `bash -c`, and each command gets a shell of its own.
import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readFile, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createWarmShell, type WarmShell } from "../../src/workspace/agent/warm-shell.ts";
import { InvalidLaunch } from "../../src/workspace/process/launcher.ts";
import { runProcess } from "../../src/workspace/process/run.ts";
import { isAlive, processesWith, waitUntil } from "./helpers.ts";

// The mark tells this file's shells from those of other tests running at the same time.
const MARK = randomUUID();
const ENV = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/tmp", LANG: "C.UTF-8", MARK };
// Everything a command could look at to tell how it was started.
const PROBE = [
  "env | sort",
  "pwd",
  'echo "$0 $# $-"',
  'for name in c d OLDPWD; do [ -v "$name" ] && echo "$name is set"; done',
  "read line && echo read || echo stdin is empty",
  // Which descriptors are open, and to what kind of file (not which one).
  "ls -l /proc/self/fd | awk 'NR > 1 { sub(/[:/].*/, \"\", $11); print $9, $11 }'",
  "exit 7",
].join("\n");

const PROXY = "printenv HTTPS_PROXY || echo none";

let root: string;
let shell: WarmShell;

beforeAll(async () => {
  root = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-warm-")));
  await mkdir(join(root, "sub"));
});

// A closed shell's waiting bash takes a moment to die; the next test must not take it for its own.
afterEach(async () => {
  shell?.close();
  expect(await waitUntil(async () => (await shellsWaiting()).length === 0)).toBe(true);
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function shellsWaiting(): Promise<number[]> {
  const shells: number[] = [];
  for (const pid of await processesWith('IFS= read -r -d ""')) {
    const environ = await readFile(`/proc/${pid}/environ`, "utf8").catch(() => "");
    if (environ.includes(MARK)) shells.push(pid);
  }
  return shells;
}

const cold = (command: string, cwd = root) =>
  runProcess({ file: "bash", args: ["-c", command], cwd, env: ENV });

describe("the agent's warm shell", () => {
  it("gives a command exactly what a cold `bash -c` gives it", async () => {
    shell = createWarmShell();
    shell.warm(ENV);
    const expected = await cold(PROBE, join(root, "sub"));
    expect(expected.exitCode).toBe(7);
    // The first run takes the shell started above; the next ones, those started after each.
    for (let run = 0; run < 3; run++) {
      const result = await shell.run(PROBE, join(root, "sub"), ENV, {});
      expect(result.stdout).toBe(expected.stdout);
      expect(result.stderr).toBe(expected.stderr);
      expect(result.exitCode).toBe(7);
    }
  });

  it("runs each command in the shell started before it, and starts the next one after", async () => {
    shell = createWarmShell();
    shell.warm(ENV);
    for (let run = 0; run < 2; run++) {
      expect(await waitUntil(async () => (await shellsWaiting()).length === 1)).toBe(true);
      const [waiting] = await shellsWaiting();
      const result = await shell.run("echo $$", root, ENV, {});
      expect(Number(result.stdout)).toBe(waiting);
    }
  });

  it("gives each command a shell of its own, and its output only", async () => {
    shell = createWarmShell();
    shell.warm(ENV);
    const first = await shell.run("cd /; x=1; export Y=2; echo one; echo err >&2", root, ENV, {});
    expect(first).toMatchObject({ stdout: "one\n", stderr: "err\n", exitCode: 0 });
    const second = await shell.run(
      "pwd; [ -v x ] || echo no x; printenv Y || echo no Y",
      root,
      ENV,
      {},
    );
    expect(second.stdout).toBe(`${root}\nno x\nno Y\n`);
  });

  it("runs a command with another environment cold, and keeps the shell waiting for the usual one", async () => {
    shell = createWarmShell();
    shell.warm(ENV);
    const withProxy = { ...ENV, HTTPS_PROXY: "http://127.0.0.1:9" };
    const result = await shell.run(PROXY, root, withProxy, {});
    expect(result.stdout).toBe("http://127.0.0.1:9\n");
    expect((await shell.run(PROXY, root, withProxy, {})).stdout).toBe("http://127.0.0.1:9\n");
    // The shell started with the agent's own environment waited through those for this one.
    expect(await waitUntil(async () => (await shellsWaiting()).length === 1)).toBe(true);
    const [waiting] = await shellsWaiting();
    expect((await shell.run(`${PROXY}; echo $$`, root, ENV, {})).stdout).toBe(`none\n${waiting}\n`);
  });

  it("kills the command's whole process group on timeout", async () => {
    shell = createWarmShell();
    shell.warm(ENV);
    const result = await shell.run("sleep 60 & echo $! > bg.pid; sleep 60", root, ENV, {
      timeoutMs: 300,
    });
    expect(result.timedOut).toBe(true);
    const pid = Number((await cold("cat bg.pid")).stdout);
    expect(await waitUntil(async () => !(await isAlive(pid)))).toBe(true);
  });

  it("refuses a NUL byte as a cold start does, and leaves no shell waiting once closed", async () => {
    shell = createWarmShell();
    shell.warm(ENV);
    await expect(shell.run("echo a\0b", root, ENV, {})).rejects.toBeInstanceOf(InvalidLaunch);
    expect((await shell.run("echo still", root, ENV, {})).stdout).toBe("still\n");
    expect(await waitUntil(async () => (await shellsWaiting()).length === 1)).toBe(true);
    shell.close();
    expect(await waitUntil(async () => (await shellsWaiting()).length === 0)).toBe(true);
    expect((await shell.run("echo cold", root, ENV, {})).stdout).toBe("cold\n");
    expect(await shellsWaiting()).toEqual([]);
  });
});
