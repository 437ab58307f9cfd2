import { randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readFile, realpath, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { SandboxUnavailableError } from "../../src/workspace/sandbox/bwrap.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import { processesWith, recordingLogger, waitUntil } from "./helpers.ts";
import { LOCAL_PROVIDERS, openWorkspace } from "./providers.ts";

// Both local providers, held to the same contract.
describe.each(LOCAL_PROVIDERS)("the %s provider", (provider) => {
  let base: string;
  let dataDir: string;
  let root: string;
  let workspace: Workspace;

  beforeAll(async () => {
    base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-sandbox-test-")));
    dataDir = join(base, "data");
    root = join(dataDir, "workspaces", "job-1");
    await mkdir(root, { recursive: true });
    await writeFile(join(dataDir, "config.json"), '{"privateKey":"data-dir-secret"}');
    workspace = await openWorkspace(provider, root, { dataDir, logger: recordingLogger() });
  });

  afterAll(async () => {
    await workspace.dispose();
    await rm(base, { recursive: true, force: true });
  });

  describe("isolation", () => {
    it("runs commands in the checkout, which it can write", async () => {
      const result = await workspace.exec("pwd && echo hi > made-inside.txt");
      expect(result.exitCode).toBe(0);
      expect(result.stdout).toBe(`${root}\n`);
      expect(await readFile(join(root, "made-inside.txt"), "utf8")).toBe("hi\n");
    });

    it("cannot write outside the checkout", async () => {
      const outside = join(base, "outside.txt");
      const result = await workspace.exec(
        `touch /usr/x; touch /etc/x; touch ${outside}; touch ${dataDir}/x; echo done`,
      );
      expect(result.stdout).toBe("done\n");
      expect(result.stderr).toMatch(/\/usr\/x/);
      await expect(readFile(outside)).rejects.toThrow();
      await expect(readFile(join(dataDir, "x"))).rejects.toThrow();
    });

    it("has a private /tmp and HOME that persist between commands", async () => {
      const name = `vmpilot-${randomUUID()}`;
      await workspace.exec(`echo kept > /tmp/${name} && echo home > ~/${name}`);
      const again = await workspace.exec(`cat /tmp/${name} ~/${name}`);
      expect(again.stdout).toBe("kept\nhome\n");
      await expect(readFile(join(tmpdir(), name))).rejects.toThrow();
    });

    it("cannot read the data directory", async () => {
      const result = await workspace.exec(
        `cat ${dataDir}/config.json; grep -rs data-dir-secret /tmp /home /run ${base}`,
      );
      expect(result.stdout).not.toContain("data-dir-secret");
      expect(result.stderr).toMatch(/No such file/);
    });

    it("hides the data directory even when a bound path contains it", async () => {
      const hidden = await openWorkspace(provider, dataDir, {
        dataDir: join(dataDir, "workspaces"),
      });
      try {
        const result = await hidden.exec("ls -A workspaces; cat config.json");
        expect(result.stdout).toBe('{"privateKey":"data-dir-secret"}');
      } finally {
        await hidden.dispose();
      }
    });

    it("binds no path an agent planted in the checkout's alternates file", async () => {
      const planted = join(base, "planted");
      await mkdir(join(planted, "objects"), { recursive: true });
      await writeFile(join(planted, "objects", "loot"), "other-tenant");
      await mkdir(join(root, ".git", "objects", "info"), { recursive: true });
      await writeFile(join(root, ".git", "objects", "info", "alternates"), `${planted}/objects\n`);
      const again = await openWorkspace(provider, root, { dataDir, logger: recordingLogger() });
      try {
        const result = await again.exec(`cat ${planted}/objects/loot`);
        expect(result.stdout).toBe("");
        expect(result.stderr).toMatch(/No such file/);
      } finally {
        await again.dispose();
        await rm(join(root, ".git"), { recursive: true, force: true });
      }
    });

    it("passes no secrets from the worker's environment", async () => {
      process.env.GITHUB_TOKEN = "ghs_sandbox_secret";
      process.env.ANTHROPIC_API_KEY = "sk-ant-sandbox-secret";
      try {
        const result = await workspace.exec(
          "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'",
        );
        expect(result.stdout).not.toContain("sandbox_secret");
        expect(result.stdout).not.toContain("sandbox-secret");
        expect(result.stdout).toContain("CI=1");
        expect(result.stdout).toContain("HOME=/home/sandbox");
      } finally {
        delete process.env.GITHUB_TOKEN;
        delete process.env.ANTHROPIC_API_KEY;
      }
    });

    it("masks machine secrets and runs without capabilities or writable kernel knobs", async () => {
      const result = await workspace.exec(
        [
          "cat /etc/shadow | wc -c",
          "grep CapEff /proc/self/status",
          'v=$(cat /proc/sys/vm/swappiness); (printf %s "$v" > /proc/sys/vm/swappiness) 2>/dev/null || echo sysctl-readonly',
          "hostname",
        ].join("; "),
      );
      expect(result.stdout).toBe("0\nCapEff:\t0000000000000000\nsysctl-readonly\nsandbox\n");
    });

    it("kills the whole process tree on timeout", async () => {
      const token = `${Math.floor(Math.random() * 1e6)}.${Math.floor(Math.random() * 1e6)}`;
      const result = await workspace.exec(
        `sleep ${token} & (sleep ${token} & wait) & sleep ${token}`,
        {
          timeoutMs: 300,
        },
      );
      expect(result.timedOut).toBe(true);
      expect(await waitUntil(async () => (await processesWith(token)).length === 0)).toBe(true);
    });

    it("leaves nothing of a command running once it ends, even what left its session", async () => {
      const token = `${Math.floor(Math.random() * 1e6)}.${Math.floor(Math.random() * 1e6)}`;
      const result = await workspace.exec(`setsid sleep ${token} >/dev/null 2>&1 & echo started`);
      expect(result).toMatchObject({ stdout: "started\n", exitCode: 0, timedOut: false });
      expect(await waitUntil(async () => (await processesWith(token)).length === 0)).toBe(true);
    });

    it("gives each command SysV IPC of its own, gone when it ends", async () => {
      const made = await workspace.exec("ipcmk -M 4096 && ipcs -m");
      expect(made.exitCode).toBe(0);
      expect(made.stdout).toMatch(/^0x[0-9a-f]+ +\d+ +\S+ +\d+ +4096 /m);
      const next = await workspace.exec("ipcs -m");
      expect(next.exitCode).toBe(0);
      expect(next.stdout).not.toMatch(/^0x/m);
    });

    it("kills running commands when disposed", async () => {
      const token = `${Math.floor(Math.random() * 1e6)}.${Math.floor(Math.random() * 1e6)}`;
      const short = await openWorkspace(provider, root, { logger: recordingLogger() });
      const running = short.exec(`sleep ${token}`);
      // The sleep itself, not the shell that enters the job's cgroup first: disposed before it has
      // entered, that shell ends with 125 rather than being killed (seen once on a slow machine).
      const sleeping = `sleep\0${token}\0`;
      expect(await waitUntil(async () => (await processesWith(sleeping)).length > 0)).toBe(true);
      await short.dispose();
      expect((await running).exitCode).toBeNull();
      expect(await waitUntil(async () => (await processesWith(token)).length === 0)).toBe(true);
      await expect(short.exec("true")).rejects.toThrow(/disposed/);
    });

    it("fails with the fix when bwrap is missing", async () => {
      const attempt = openWorkspace(provider, root, { bwrapPath: join(base, "no-such-bwrap") });
      await expect(attempt).rejects.toBeInstanceOf(SandboxUnavailableError);
      await expect(attempt).rejects.toThrow(/apt-get install bubblewrap/);
    });
  });

  describe("network", () => {
    let server: http.Server;
    let port: number;
    let closedPort: number;

    beforeAll(async () => {
      // 127.0.0.2 is loopback on the worker but not in the sandbox's NO_PROXY list.
      server = http.createServer((_req, res) => res.end("hello from the allow-list"));
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.2", resolve));
      port = (server.address() as AddressInfo).port;
      const other = http.createServer();
      await new Promise<void>((resolve) => other.listen(0, "127.0.0.2", resolve));
      closedPort = (other.address() as AddressInfo).port;
      await new Promise((resolve) => other.close(resolve));
    });

    afterAll(async () => {
      await new Promise((resolve) => server.close(resolve));
    });

    it("is refused by default", async () => {
      const result = await workspace.exec(
        `curl -sS -m 5 http://127.0.0.2:${port}/; echo "curl=$?"; node -e "fetch('http://127.0.0.2:${port}/').then(() => console.log('reached'), () => console.log('node refused'))"`,
      );
      expect(result.stdout).not.toContain("hello");
      expect(result.stdout).toContain("node refused");
      expect(result.stdout).not.toContain("curl=0");
    });

    it("reaches allow-listed hosts through the proxy and records refusals", async () => {
      // State deeper than a Unix socket's path may be (a long DATA_DIR): the proxy's socket and
      // the agent's are still reached.
      const stateDir = join(base, "d".repeat(120), "state");
      await mkdir(stateDir, { recursive: true });
      const networked = await openWorkspace(provider, root, {
        allowHosts: [`127.0.0.2:${port}`],
        // Loopback is refused unless the operator opens it (NETWORK_ALLOW_PRIVATE).
        allowPrivate: ["127.0.0.2/32"],
        logger: recordingLogger(),
        stateDir,
      });
      try {
        const result = await networked.exec(
          [
            `curl -sS -m 5 http://127.0.0.2:${port}/`,
            `curl -sS -m 5 --proxytunnel http://127.0.0.2:${port}/`,
            `node -e "fetch('http://127.0.0.2:${port}/').then((r) => r.text()).then(console.log)"`,
            `curl -sS -m 5 -o /dev/null -w '%{http_code}' http://127.0.0.2:${closedPort}/`,
          ].join("; echo; "),
        );
        expect(result.stdout).toBe(
          "hello from the allow-list\nhello from the allow-list\nhello from the allow-list\n\n403",
        );
        expect(networked.blockedConnections()).toEqual([
          { host: "127.0.0.2", port: closedPort, at: expect.any(Date) },
        ]);
      } finally {
        await networked.dispose();
      }
    });

    it("cannot reach the worker's loopback even when the allow-list names it", async () => {
      const worker = http.createServer((_req, res) => res.end("worker database"));
      await new Promise<void>((resolve) => worker.listen(0, "127.0.0.1", resolve));
      onTestFinished(() => new Promise<void>((resolve) => worker.close(() => resolve())));
      const workerPort = (worker.address() as AddressInfo).port;
      const networked = await openWorkspace(provider, root, {
        allowHosts: ["127.0.0.1", "localhost"],
        logger: recordingLogger(),
      });
      onTestFinished(() => networked.dispose());
      // NO_PROXY would send these to the sandbox's own loopback; through the proxy they reach the
      // worker's, as a name resolving to 127.0.0.1 would.
      const result = await networked.exec(
        [
          `curl -sS -m 5 --noproxy '' http://127.0.0.1:${workerPort}/`,
          `curl -sS -m 5 --noproxy '' --proxytunnel http://localhost:${workerPort}/`,
        ].join("; echo; "),
      );
      expect(result.stdout).not.toContain("worker database");
      expect(networked.blockedConnections()).toEqual([
        {
          host: "127.0.0.1",
          port: workerPort,
          reason: "127.0.0.1 resolves to 127.0.0.1 (loopback)",
          at: expect.any(Date),
        },
        {
          host: "localhost",
          port: workerPort,
          reason: expect.stringMatching(/^localhost resolves to (127\.0\.0\.1|::1) \(loopback\)$/),
          at: expect.any(Date),
        },
      ]);
    });
  });
});
