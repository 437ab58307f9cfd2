import { execFileSync, fork } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  InvalidLaunch,
  LaunchError,
  launch,
  launchAndCollect,
} from "../../src/workspace/process/launcher.ts";
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
    expect(result).toEqual({
      code: 3,
      signal: null,
      stdout: "from stdin",
      stderr: "oops\n",
      cut: false,
    });
  });

  it("stops a process whose output passes the cap, with the output cut there", async () => {
    const result = await launchAndCollect(sh("exec yes"), 100_000);
    expect(result).toMatchObject({ cut: true, signal: "SIGKILL" });
    expect(result.stdout).toBe("y\n".repeat(50_000));
    expect(await launchAndCollect(sh("echo small"), 100)).toMatchObject({
      cut: false,
      code: 0,
      stdout: "small\n",
    });
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

  it("starts a process ahead and gives it its input later, once", async () => {
    const out: string[] = [];
    const child = launch({ ...sh("cat; echo done"), inputLater: true }, (_stream, chunk) =>
      out.push(chunk.toString()),
    );
    child.write("later ");
    child.write("twice ");
    expect(await child.done).toEqual({ code: 0, signal: null });
    expect(out.join("")).toBe("later done\n");
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

  it("fails a request with a NUL byte alone, while another command runs on to its end", async () => {
    const dir = await mkdtemp(join(tmpdir(), "launcher-"));
    const gate = join(dir, "gate");
    execFileSync("mkfifo", [gate]);
    try {
      const { child, line } = firstLine(`echo started; cat ${gate}; echo finished`, true);
      expect(await line).toBe("started");
      const error = await launchAndCollect(sh("echo a\0b")).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidLaunch);
      expect((error as LaunchError).code).toBe("EINVAL");
      expect((error as LaunchError).message).toMatch(/NUL/);
      await writeFile(gate, "released\n");
      expect(await child.done).toEqual({ code: 0, signal: null });
      expect((await launchAndCollect(sh("echo after"))).stdout).toBe("after\n");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("answers malformed requests sent straight to it with an error, and keeps serving", async () => {
    const launcher = fork(
      fileURLToPath(new URL("../../src/workspace/process/launcher-process.ts", import.meta.url)),
      {
        execArgv: [],
        serialization: "advanced",
        stdio: ["ignore", "inherit", "inherit", "ipc"],
      },
    );
    const replies: Array<Record<string, unknown>> = [];
    launcher.on("message", (reply: Record<string, unknown>) => replies.push(reply));
    const replyTo = (id: number, type: string) =>
      waitUntil(async () => replies.some((r) => r.id === id && r.type === type));
    try {
      const good = { file: "sh", args: ["-c", "echo ok"], cwd: "/", env, group: false };
      launcher.send({ type: "launch", id: 1, spec: { ...good, args: ["-c", "echo a\0b"] } });
      launcher.send({ type: "launch", id: 2, spec: { ...good, env: { A: "x\0y" } } });
      launcher.send({ type: "launch", id: 3, spec: { ...good, cwd: 42 } });
      launcher.send({ type: "kill", id: 4, signal: "SIGNOPE" });
      launcher.send({ type: "launch", id: 6, spec: { ...good, input: "x", inputLater: true } });
      launcher.send({ type: "input", id: 4, input: "to nobody" });
      launcher.send("not a request");
      launcher.send({ type: "launch", id: 5, spec: good });
      expect(await replyTo(5, "exited")).toBe(true);
      for (const id of [1, 2, 3, 6]) {
        expect(replies.find((r) => r.id === id)).toMatchObject({ type: "failed", code: "EINVAL" });
      }
      // The process's own exit may come before or after its output, and always before its end.
      const types = replies.filter((r) => r.id === 5).map((r) => r.type);
      expect(types.filter((type) => type !== "ended")).toEqual(["output", "exited"]);
      expect(types.indexOf("ended")).toBeGreaterThanOrEqual(0);
      expect(types.indexOf("ended")).toBeLessThan(types.indexOf("exited"));
    } finally {
      launcher.kill("SIGKILL");
    }
  });
});
