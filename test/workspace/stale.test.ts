import { spawn } from "node:child_process";
import { mkdir, mkdtemp, realpath, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { sweepCgroups } from "../../src/workspace/sandbox/cgroup.ts";
import { kernelSupport } from "../../src/workspace/sandbox/limits.ts";
import { sweepScratchDisks } from "../../src/workspace/sandbox/scratch-disk.ts";
import { jobCgroupDirs, mountedAt } from "./helpers.ts";

const kernel = await kernelSupport();
let base: string | undefined;

afterEach(async () => {
  if (base) await rm(base, { recursive: true, force: true });
});

/** A worker that opens a sandbox, prints its command's cgroups, and waits to be killed. */
const WORKER = `
import { createSandboxWorkspace } from "./src/workspace/sandbox/sandbox.ts";
const workspace = await createSandboxWorkspace(process.env.ROOT, { stateDir: process.env.STATE });
const result = await workspace.exec("cat /proc/self/cgroup");
process.stdout.write(JSON.stringify(result.stdout) + "\\n");
setInterval(() => {}, 60_000);
`;

it("removes the cgroups and scratch disk of a worker that was killed", async ({ skip }) => {
  const cannot = [...Object.values(kernel.cgroups.problems), kernel.scratchProblem ?? []].flat();
  skip(cannot.length > 0, `this machine cannot: ${cannot.join("; ")}`);
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-stale-")));
  const root = join(base, "repo");
  const stateDir = join(base, "state");
  await mkdir(root);
  await mkdir(stateDir);
  const worker = spawn(process.execPath, ["--input-type=module", "-e", WORKER], {
    cwd: new URL("../../", import.meta.url).pathname,
    env: { PATH: process.env.PATH, ROOT: root, STATE: stateDir },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => worker.once("exit", resolve));
  const printed = await new Promise<string>((resolve, reject) => {
    worker.stdout.once("data", (chunk: Buffer) => resolve(JSON.parse(chunk.toString())));
    worker.once("exit", (code) => reject(new Error(`the worker exited with ${code}`)));
  });
  worker.kill("SIGKILL");
  await exited;
  const dirs = await jobCgroupDirs(printed);
  expect(dirs.length).toBeGreaterThan(0);
  expect(await mountedAt(stateDir)).toBe(true);

  await sweepCgroups(kernel.cgroups);
  await sweepScratchDisks();

  for (const dir of dirs) await expect(stat(dir)).rejects.toThrow(/ENOENT/);
  expect(await mountedAt(stateDir)).toBe(false);
  await expect(stat(stateDir)).rejects.toThrow(/ENOENT/);
});
