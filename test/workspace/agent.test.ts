// The workspace agent, for real: in a bubblewrap sandbox standing in for a VM (the `agent`
// provider), held to the local providers' contract; and in-process, attacked without the secret.
import {
  mkdir,
  mkdtemp,
  readdir,
  readFile,
  realpath,
  rm,
  symlink,
  writeFile,
} from "node:fs/promises";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createLocalAgentWorkspace } from "../../src/workspace/agent/local.ts";
import { createAgentServer } from "../../src/workspace/agent/server.ts";
import { PathEscapeError } from "../../src/workspace/paths.ts";
import { baseEnv } from "../../src/workspace/process/env.ts";
import { FileRefusedError } from "../../src/workspace/read-capped.ts";
import { AGENT_DIR } from "../../src/workspace/sandbox/bwrap.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { processesWith, recordingLogger, waitUntil } from "./helpers.ts";

let base: string;
let root: string;
let dataDir: string;
let workspace: Workspace;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-agent-test-")));
  dataDir = join(base, "data");
  root = join(dataDir, "workspaces", "job-1");
  await mkdir(root, { recursive: true });
  await writeFile(join(dataDir, "config.json"), '{"privateKey":"data-dir-secret"}');
  process.env.GITHUB_TOKEN = "ghs_agent_leak_probe";
  workspace = await createLocalAgentWorkspace(root, { dataDir, logger: recordingLogger() });
});

afterAll(async () => {
  delete process.env.GITHUB_TOKEN;
  await workspace?.dispose();
  await rm(base, { recursive: true, force: true });
});

describe("sandbox isolation on the local engine (the workspace agent in a local sandbox)", () => {
  it("runs commands in the checkout through the agent and reports output and exit code", async () => {
    expect(workspace).toMatchObject({ isolation: "sandbox", engine: "local" });
    const result = await workspace.exec("pwd; echo oops >&2; echo made > inside.txt; exit 3");
    expect(result).toMatchObject({ stdout: `${root}\n`, stderr: "oops\n", exitCode: 3 });
    expect(await readFile(join(root, "inside.txt"), "utf8")).toBe("made\n");
    await mkdir(join(root, "sub"), { recursive: true });
    expect((await workspace.exec("pwd", { cwd: "sub" })).stdout).toBe(`${join(root, "sub")}\n`);
    await expect(workspace.exec("pwd", { cwd: "../.." })).rejects.toBeInstanceOf(PathEscapeError);
  });

  it("reaches its agent when the state directory is deeper than a Unix socket's path may be", async () => {
    const checkout = join(base, "deep-checkout");
    const stateDir = join(base, "d".repeat(120), "state");
    await mkdir(checkout);
    await mkdir(stateDir, { recursive: true });
    // A temporary directory of this test's own: files running beside it (sandbox.test.ts) make
    // links of their own in the run's, which this test would count as its leaks.
    const ownTmp = await mkdtemp(join(tmpdir(), "s-"));
    vi.stubEnv("TMPDIR", ownTmp);
    const deep = await createLocalAgentWorkspace(checkout, { dataDir, stateDir }).finally(() =>
      vi.unstubAllEnvs(),
    );
    try {
      expect(await deep.exec("echo reached")).toMatchObject({ stdout: "reached\n", exitCode: 0 });
    } finally {
      await deep.dispose();
    }
    const links = (await readdir(ownTmp)).filter((name) => name.startsWith("vmpilot-socket-"));
    expect(links).toEqual([]);
    await rm(ownTmp, { recursive: true, force: true });
  });

  it("leaks nothing: no worker environment, no secret, no data directory, no project files", async () => {
    const result = await workspace.exec(
      "env; ls /tmp; cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; cat config.json ../../config.json 2>&1; ls -a " +
        process.cwd(),
      { env: { EXTRA: "yes" } },
    );
    expect(result.stdout).toContain("EXTRA=yes");
    expect(result.stdout).not.toContain("ghs_agent_leak_probe");
    expect(result.stdout).not.toContain("data-dir-secret");
    expect(result.stdout).not.toContain("vmpilot-agent.key");
    expect(result.stdout).not.toMatch(/^\.env$/m);
    await expect(workspace.exec("true", { env: { NPM_TOKEN: "x" } })).rejects.toThrow(/NPM_TOKEN/);
  });

  it("caps output for the model and keeps the full output", async () => {
    const result = await workspace.exec(
      "echo START; head -c 100000 /dev/zero | tr '\\0' x; echo; echo END",
    );
    expect(result.truncated).toBe(true);
    expect(result.stdout.length).toBeLessThanOrEqual(30_000);
    expect(result.fullStdout.length).toBe(100_011);
  });

  it("kills the whole process tree on timeout and on abort", async () => {
    const token = () => `${Math.floor(Math.random() * 1e6)}.${Math.floor(Math.random() * 1e6)}`;
    const timedOut = token();
    const timed = await workspace.exec(`sleep ${timedOut} & (sleep ${timedOut} & wait) & wait`, {
      timeoutMs: 300,
    });
    expect(timed).toMatchObject({ timedOut: true, exitCode: null });
    expect(await waitUntil(async () => (await processesWith(timedOut)).length === 0)).toBe(true);

    const aborted = token();
    const controller = new AbortController();
    const running = workspace.exec(`sleep ${aborted} & wait`, { signal: controller.signal });
    expect(await waitUntil(async () => (await processesWith(aborted)).length > 0)).toBe(true);
    controller.abort();
    expect(await running).toMatchObject({ timedOut: false, exitCode: null });
    expect(await waitUntil(async () => (await processesWith(aborted)).length === 0)).toBe(true);
  });

  it("keeps its socket and key out of its commands' sight, and out of their reach", async () => {
    const look = await workspace.exec(
      // The project's own sources are bound in read-only (and may sit under /tmp): only the
      // agent's socket and key are looked for.
      `ls -A ${AGENT_DIR}; find /run /tmp /home \\( -name agent.sock -o -name agent.key \\) 2>/dev/null; echo looked`,
    );
    expect(look.stdout).toBe("looked\n");
    // What a command puts there is its own: the worker still reaches the agent.
    const planted = await workspace.exec(
      `ln -s /etc/passwd ${AGENT_DIR}/agent.sock && echo planted`,
    );
    expect(planted.stdout).toBe("planted\n");
    expect((await workspace.exec("echo reached")).stdout).toBe("reached\n");
  });

  it("reads, writes and lists files inside the checkout only, refusing what is not a regular file", async () => {
    await workspace.writeFile("a/b.txt", "hello");
    expect((await workspace.readFile("a/b.txt", 100)).toString()).toBe("hello");
    expect(await workspace.listDir("a")).toEqual(["b.txt"]);
    await symlink("/etc", join(root, "etc"));
    await expect(workspace.readFile("etc/passwd", 100)).rejects.toBeInstanceOf(PathEscapeError);
    await expect(workspace.writeFile("../x", "no")).rejects.toBeInstanceOf(PathEscapeError);
    await expect(workspace.readFile("a", 100)).rejects.toBeInstanceOf(FileRefusedError);
    await expect(workspace.readFile("a/b.txt", 2)).rejects.toMatchObject({ reason: "too_large" });
  });
});

describe("the workspace agent under attack", () => {
  let dir: string;
  let socketPath: string;
  const logged: Array<Record<string, unknown>> = [];
  const SECRET = "s".repeat(43);
  let server: ReturnType<typeof createAgentServer>;

  beforeAll(async () => {
    dir = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-agent-attack-")));
    await mkdir(join(dir, "repo"));
    socketPath = join(dir, "agent.sock");
    server = createAgentServer({
      root: join(dir, "repo"),
      secret: SECRET,
      env: baseEnv(dir),
      log: (line) => logged.push(line),
    });
    server.listen(socketPath);
    await new Promise((resolve) => server.once("listening", resolve));
  });

  afterAll(async () => {
    server.close();
    await rm(dir, { recursive: true, force: true });
  });

  function send(path: string, body: string | Buffer, secret?: string, length?: number) {
    return new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(
        {
          socketPath,
          path,
          method: "POST",
          headers: {
            "content-type": "application/json",
            "content-length": length ?? Buffer.byteLength(body),
            ...(secret ? { authorization: `Bearer ${secret}` } : {}),
          },
        },
        (res) => {
          let text = "";
          res.on("data", (c) => {
            text += c;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on("error", reject);
      if (length === undefined) req.end(body);
      else req.flushHeaders();
    });
  }

  const exec = (command: string) => JSON.stringify({ id: "x", command });

  it("refuses and logs a request without the secret, or with another workspace's; nothing runs", async () => {
    for (const secret of [undefined, "t".repeat(43)]) {
      const answer = await send("/v1/exec", exec(`touch ${join(dir, "ran")}`), secret);
      expect(answer.status).toBe(401);
    }
    await expect(readFile(join(dir, "ran"))).rejects.toThrow();
    expect(logged.filter((l) => /without the workspace's secret/.test(String(l.msg)))).toHaveLength(
      2,
    );
  });

  it("refuses a path outside the checkout, and says so in its log", async () => {
    const answer = await send(
      "/v1/read",
      JSON.stringify({ path: "../agent.sock", maxBytes: 10 }),
      SECRET,
    );
    expect(answer.status).toBe(422);
    expect(JSON.parse(answer.text).error.kind).toBe("escape");
    expect(logged.some((l) => /outside the checkout/.test(String(l.msg)))).toBe(true);
  });

  it("refuses an enormous body before reading it, and malformed requests", async () => {
    const huge = await send("/v1/exec", Buffer.alloc(2 * 1024 * 1024, 0x20), SECRET);
    expect(huge.status).toBe(413);
    const malformed = await send("/v1/exec", JSON.stringify({ command: "true", extra: 1 }), SECRET);
    expect(malformed.status).toBe(400);
    expect(logged.some((l) => l.reason === "body too large")).toBe(true);
  });

  it("refuses a checkout with a hostile branch, origin, proxy or shallow cut, one over the cap, and a second one", async () => {
    const checkout = (query: string, length?: number) =>
      send(`/v1/checkout?${query}`, "", SECRET, length);
    for (const query of [
      "branch=--upload-pack%3Dtouch%20x",
      "branch=..%2F..%2Fetc",
      "branch=main&origin=https%3A%2F%2Fx%0Aevil",
      "branch=main&proxy=file%3A%2F%2F%2Fetc%2Fpasswd",
      `branch=main&shallow=${"a".repeat(40)}%0A${"b".repeat(40)}`,
      "branch=main&shallow=..%2F..%2Fx",
    ]) {
      expect((await checkout(query)).status, query).toBe(400);
    }
    expect((await checkout("branch=main", 5 * 1024 ** 3)).status).toBe(413);
    expect(await readdir(join(dir, "repo"))).toEqual([]);
    const first = await checkout("branch=main&origin=https%3A%2F%2Fgithub.com%2Fo%2Fr.git");
    expect(first.status).toBe(200);
    expect(JSON.parse(first.text)).toEqual({ root: join(dir, "repo") });
    expect(await readdir(join(dir, "repo"))).toEqual([".git"]);
    const again = await checkout("branch=main");
    expect(again.status).toBe(400);
    expect(again.text).toContain("the checkout exists");
  });
});
