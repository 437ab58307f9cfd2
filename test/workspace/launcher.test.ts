import { fork } from "node:child_process";
import { once } from "node:events";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { LaunchError, launch, launchAndCollect } from "../../src/workspace/launcher.ts";
import { isAlive, processesWith, waitUntil } from "./helpers.ts";

const env = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
const sh = (script: string, group = false) => ({
  file: "sh",
  args: ["-c", script],
  cwd: "/",
  env,
  group,
});

/** Resolves with the first line a launched process prints. */
function firstLine(script: string, group: boolean) {
  let found: (line: string) => void = () => {};
  const line = new Promise<string>((resolve) => {
    found = resolve;
  });
  const child = launch(sh(script, group), (_stream, chunk) => found(chunk.toString().trim()));
  return { child, line };
}

async function parentOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}

describe("process launcher", () => {
  it("returns output, exit code and stdin round trip", async () => {
    const result = await launchAndCollect({
      ...sh("cat; echo oops >&2; exit 3"),
      input: "from stdin",
    });
    expect(result).toEqual({ code: 3, signal: null, stdout: "from stdin", stderr: "oops\n" });
  });

  it("starts processes from a launcher process, not from this one", async () => {
    const { child, line } = firstLine("echo $$; sleep 30", true);
    const pid = Number(await line);
    const launcher = await parentOf(pid);
    expect(launcher).not.toBe(process.pid);
    expect(await parentOf(launcher)).toBe(process.pid);
    child.kill();
    expect((await child.done).signal).toBe("SIGKILL");
  });

  it("reports a program that cannot start", async () => {
    const error = await launchAndCollect({ ...sh(""), file: "/no/such/program" }).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LaunchError);
    expect((error as LaunchError).code).toBe("ENOENT");
  });

  it("kills a group's background children with it, and when the leader exits", async () => {
    const killed = firstLine("sleep 300 & echo $!; wait", true);
    const sleeper = Number(await killed.line);
    killed.child.kill();
    await killed.child.done;
    expect(await waitUntil(async () => !(await isAlive(sleeper)))).toBe(true);

    const left = await launchAndCollect(sh("sleep 300 & echo $!", true));
    expect(await waitUntil(async () => !(await isAlive(Number(left.stdout))))).toBe(true);
  });

  it("fails pending launches when the launcher dies, and starts a new one", async () => {
    const { child, line } = firstLine("echo $$; exec sleep 30", false);
    const sleeper = Number(await line);
    process.kill(await parentOf(sleeper), "SIGKILL");
    await expect(child.done).rejects.toThrow(/process launcher exited/);
    process.kill(sleeper, "SIGKILL");
    expect((await launchAndCollect(sh("echo again"))).stdout).toBe("again\n");
  });

  it("takes everything it started down when the worker is killed", async () => {
    const worker = fork(fileURLToPath(new URL("./fixtures/launch-sleeper.ts", import.meta.url)), {
      execArgv: [],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const [sleeper] = (await once(worker, "message")) as [number];
    expect(await isAlive(sleeper)).toBe(true);
    worker.kill("SIGKILL");
    expect(await waitUntil(async () => !(await isAlive(sleeper)))).toBe(true);
    expect(await waitUntil(async () => (await processesWith("launch-sleeper")).length === 0)).toBe(
      true,
    );
  });
});
