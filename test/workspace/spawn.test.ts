// A command that keeps running while the worker talks to it over its stdin and stdout (an MCP
// server), in every workspace that runs a job's commands on this machine: held to what a command
// is held to (the checkout, the environment, the kill rules), and talked to while it runs.
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createHostWorkspace } from "../../src/workspace/sandbox/host.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { processesWith, waitUntil } from "./helpers.ts";
import { LOCAL_PROVIDERS, openWorkspace } from "./providers.ts";

const PROVIDERS = ["host", ...LOCAL_PROVIDERS] as const;
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

/** Spawns `command`, collecting its output. */
async function spawned(workspace: Workspace, command: string, signal?: AbortSignal) {
  const out = { stdout: "", stderr: "" };
  const process = await workspace.spawn(command, {
    onOutput: (stream, chunk) => {
      out[stream] += chunk.toString();
    },
    signal,
  });
  const seen = (text: string) => waitUntil(async () => out.stdout.includes(text), 10_000);
  return { process, out, seen };
}

describe.each(PROVIDERS)("a command spawned in the %s workspace", (provider) => {
  let base: string;
  let root: string;
  let workspace: Workspace;

  beforeAll(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-spawn-test-")));
    root = join(base, "repo");
    await mkdir(root);
    process.env.GITHUB_TOKEN = "ghs_spawn_leak_probe";
    workspace =
      provider === "host"
        ? createHostWorkspace(root, { logger: quiet })
        : await openWorkspace(provider, root, { logger: quiet });
  });

  afterAll(async () => {
    delete process.env.GITHUB_TOKEN;
    await workspace.dispose();
    await rm(base, { recursive: true, force: true });
  });

  it("is talked to over its stdin and stdout while it runs, in the checkout, with a command's environment", async () => {
    const { process, out, seen } = await spawned(
      workspace,
      'pwd; echo "token=$(printenv GITHUB_TOKEN || echo none)"; while IFS= read -r line; do echo "got $line"; done',
    );
    await process.write("one\n");
    expect(await seen("got one\n")).toBe(true);
    await process.write("two\nthree\n");
    expect(await seen("got three\n")).toBe(true);
    expect(out.stdout).toBe(`${root}\ntoken=none\ngot one\ngot two\ngot three\n`);
    // Commands run meanwhile, and it runs on.
    expect((await workspace.exec("echo beside")).stdout).toBe("beside\n");
    await process.write("four\n");
    expect(await seen("got four\n")).toBe(true);
    process.kill();
    expect(await process.exited).toEqual({ code: null });
  });

  it("is spoken to first when it says nothing until then", async () => {
    const { process, out, seen } = await spawned(workspace, "exec cat");
    await process.write("hello\n");
    expect(await seen("hello\n")).toBe(true);
    expect(out.stdout).toBe("hello\n");
    process.kill();
    await process.exited;
  });

  it("reports its exit and its stderr", async () => {
    const { process, out } = await spawned(workspace, "echo oops >&2; exit 3");
    expect(await process.exited).toEqual({ code: 3 });
    expect(out.stderr).toBe("oops\n");
  });

  it("is killed, with what it started, when its signal aborts", async () => {
    const token = `${Math.floor(Math.random() * 1e6)}.${Math.floor(Math.random() * 1e6)}`;
    const stop = new AbortController();
    const { process, seen } = await spawned(
      workspace,
      `sleep ${token} & echo started; wait`,
      stop.signal,
    );
    expect(await seen("started")).toBe(true);
    stop.abort();
    expect(await process.exited).toEqual({ code: null });
    expect(await waitUntil(async () => (await processesWith(token)).length === 0)).toBe(true);
  });

  it("dies with the workspace", async () => {
    const other = join(base, `other-${provider}`);
    await mkdir(other);
    const gone =
      provider === "host"
        ? createHostWorkspace(other, { logger: quiet })
        : await openWorkspace(provider, other, { logger: quiet });
    const { process, seen } = await spawned(gone, "echo up; exec cat");
    expect(await seen("up")).toBe(true);
    await gone.dispose();
    expect((await process.exited).code).toBeNull();
    await expect(gone.spawn("true", { onOutput() {} })).rejects.toThrow(/disposed/);
  });
});
