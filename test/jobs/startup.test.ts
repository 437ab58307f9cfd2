// Startup when a dependency is missing: GitHub unreachable (web) or no usable sandbox (worker).
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, rm, symlink } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPermanent } from "../../src/errors.ts";
import { createLogger } from "../../src/log/logger.ts";
import type { Database } from "../../src/store/database.ts";
import { SandboxUnavailableError } from "../../src/workspace/index.ts";
import { InvalidLaunch, LaunchError } from "../../src/workspace/process/launcher.ts";
import {
  APP_SLUG,
  appPrivateKey,
  startTestServer,
  testConfig,
  WEBHOOK_SECRET,
} from "../helpers/app.ts";
import { openTestDatabase, seedDataDir } from "../helpers/db.ts";
import { github, useGitHubMock } from "../helpers/github-mock.ts";

useGitHubMock();

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((done) => probe.listen(0, "127.0.0.1", done));
  const { port } = probe.address() as AddressInfo;
  await new Promise((done) => probe.close(done));
  return port;
}

describe("a web process that cannot reach GitHub at startup", () => {
  let db: Database;
  beforeAll(async () => {
    db = await openTestDatabase();
  });
  afterAll(() => db?.close());

  it("answers /healthz as not ready and retries until GET /app answers, then serves", async () => {
    // A closed loopback port stands for a GitHub that is not reachable yet; then it comes up.
    const port = await freePort();
    const github = createServer((req, res) => {
      res.writeHead(req.url === "/app" ? 200 : 404, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: 1, slug: APP_SLUG, name: APP_SLUG, owner: { login: "acme" } }));
    });
    const listening = deferred<string>();
    const logger = createLogger({ level: "warn", format: "json" });
    const failures = deferred();
    logger.warn = ((message: string) => {
      if (message.startsWith("GitHub is not reachable")) failures.resolve();
    }) as typeof logger.warn;
    const starting = startTestServer(db, {
      config: testConfig({ baseUrl: `http://127.0.0.1:${port}` }),
      logger,
      githubRetry: { firstDelayMs: 1, maxDelayMs: 1 },
      onListening: listening.resolve,
    });
    const url = await listening.promise;
    await failures.promise;
    const waiting = await fetch(`${url}/healthz`);
    expect(waiting.status).toBe(503);
    expect(await waiting.json()).toMatchObject({
      status: "error",
      waiting: { github: "connecting" },
    });
    github.listen(port, "127.0.0.1");
    const server = await starting;
    try {
      expect(server.appSlug).toBe(APP_SLUG);
      const ready = await fetch(`${url}/healthz`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({ status: "ok", waiting: {} });
    } finally {
      await server.close();
      github.close();
    }
  });

  it("gives up at once when GitHub refuses the app's credentials", async () => {
    github().get("/app").reply(401, { message: "A JSON web token could not be decoded" });
    await expect(
      startTestServer(db, { githubRetry: { firstDelayMs: 1, maxDelayMs: 1 } }),
    ).rejects.toThrow(/JSON web token/);
  });
});

describe("a worker without bubblewrap", () => {
  let root: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "vmpilot-nobwrap-"));
  });
  afterAll(() => rm(root, { recursive: true, force: true }));

  it("says so once at startup, naming the fix, and /healthz reports it not ready", async () => {
    const bin = join(root, "bin");
    await mkdir(bin);
    await symlink("/usr/bin/git", join(bin, "git"));
    await seedDataDir(join(root, "data"));
    const child = spawn(process.execPath, ["bin/start.js", "--role", "worker"], {
      cwd: new URL("../../", import.meta.url).pathname,
      env: {
        HOME: process.env.HOME,
        PATH: bin,
        APP_ID: "1",
        PRIVATE_KEY: appPrivateKey(),
        WEBHOOK_SECRET,
        ANTHROPIC_API_KEY: "sk-ant-test",
        DATA_DIR: join(root, "data"),
        HOST: "127.0.0.1",
        PORT: "0",
        LOG_FORMAT: "json",
        METRICS_TOKEN: "startup-metrics-token",
        // No reconciliation with GitHub, which is not there (testConfig's default too): on its
        // way out the worker would wait for the name lookup of api.github.com to fail.
        INSTALLATION_SYNC_MINUTES: "0",
      },
    });
    try {
      const lines: Array<{ level: number; msg: string; url?: string }> = [];
      const sandboxError = new Promise<string>((resolve, reject) => {
        let buffered = "";
        child.stdout.on("data", (chunk) => {
          buffered += chunk;
          const parts = buffered.split("\n");
          buffered = parts.pop() ?? "";
          for (const part of parts) {
            const line = JSON.parse(part);
            lines.push(line);
            if (line.msg.startsWith("jobs cannot run")) resolve(line.msg);
          }
        });
        child.on("exit", (code) => reject(new Error(`exited with ${code}: ${lines.length} lines`)));
      });
      expect(await sandboxError).toMatch(/bubblewrap.*apt-get install bubblewrap/);
      const url = lines.find((line) => line.msg === "vmpilot started")?.url;
      const response = await fetch(`${url}/healthz`);
      expect(response.status).toBe(503);
      expect(await response.json()).toMatchObject({
        role: "worker",
        waiting: { sandbox: "unavailable" },
        // No mkfs.ext4 or mount on this PATH: the checkout, /tmp and HOME cannot get a filesystem.
        sandboxLimits: { disk: expect.stringMatching(/^best effort: /) },
      });
      const bestEffort = "some sandbox limits are only best effort on this host";
      expect(lines.filter((line) => line.msg === bestEffort)).toHaveLength(1);
      expect(lines.filter((line) => line.level >= 50)).toHaveLength(1);
      const metrics = await fetch(`${url}/metrics`, {
        headers: { authorization: "Bearer startup-metrics-token" },
      });
      expect(await metrics.text()).toContain(
        'vmpilot_workspace_errors_total{kind="sandbox_unavailable"} 1',
      );
    } finally {
      const gone = new Promise((done) => child.once("exit", done));
      child.kill("SIGTERM");
      await gone;
    }
  });
});

describe("permanent errors", () => {
  it("are known by type: the job fails at once instead of retrying", () => {
    expect(isPermanent(new SandboxUnavailableError("install bubblewrap"))).toBe(true);
    expect(isPermanent(new InvalidLaunch("NUL in an argument"))).toBe(true);
    expect(isPermanent(new LaunchError("the launcher exited", "EPIPE"))).toBe(false);
    expect(isPermanent(new Error("GitHub 502"))).toBe(false);
  });
});
