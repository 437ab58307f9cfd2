import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { type Env, loadConfig, loadDotEnv, VARIABLES } from "../../src/config/env.ts";
import { appPrivateKey } from "../helpers/app.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const key = appPrivateKey();
const app = { APP_ID: "123", PRIVATE_KEY: key, WEBHOOK_SECRET: "s3cret-value" };

function problems(env: Env): string[] {
  const result = loadConfig(env, ROOT);
  return "problems" in result ? result.problems : [];
}

function config(env: Env) {
  const result = loadConfig(env, ROOT);
  if ("problems" in result) throw new Error(result.problems.join("\n"));
  return result.config;
}

describe("loadConfig", () => {
  it("applies defaults", () => {
    expect(config({})).toMatchObject({
      appId: undefined,
      dataDir: join(ROOT, "data"),
      logLevel: "info",
      logFormat: "pretty",
      host: "localhost",
      port: 3000,
      baseUrl: "https://api.github.com",
      label: "vmpilot",
      command: "vmpilot",
      workerConcurrency: 2,
      spareCheckouts: 20,
      shutdownDrainSeconds: 30,
      installationSyncMinutes: 15,
      publicUrl: "http://localhost:3000",
      allowedUsers: [],
      networkAllowPrivate: [],
      sandboxLimits: { processes: 1024, memoryMb: 8192, fileMb: 2048, diskMb: 20_480 },
      workspace: { isolation: "sandbox", engine: "local" },
    });
  });

  it("reads how strict workspaces are and where vm runs, with no warning", () => {
    const loaded = loadConfig({ WORKSPACE_ISOLATION: "vm", WORKSPACE_ENGINE: "kubernetes" }, ROOT);
    expect(loaded).toMatchObject({
      config: { workspace: { isolation: "vm", engine: "kubernetes" } },
      warnings: [],
    });
    expect(config({ WORKSPACE_ENGINE: "fly" }).workspace).toEqual({
      isolation: "sandbox",
      engine: "fly",
    });
  });

  it.each([
    [{ WORKSPACE_PROVIDER: "agent" }, "sandbox", "local"],
    [{ WORKSPACE_PROVIDER: "sandbox" }, "sandbox", "local"],
    [{ WORKSPACE_PROVIDER: "fly" }, "vm", "fly"],
    [{ WORKSPACE_PROVIDER: "kubernetes", WORKSPACE_VM_PROVIDER: "fly" }, "vm", "kubernetes"],
    [{ WORKSPACE_VM_PROVIDER: "kubernetes" }, "sandbox", "kubernetes"],
    [{ WORKSPACE_PROVIDER: "agent", WORKSPACE_VM_PROVIDER: "fly" }, "sandbox", "fly"],
  ])("reads the old %j as it meant, warning once with the new names", (env, isolation, engine) => {
    const loaded = loadConfig(env, ROOT);
    if ("problems" in loaded) throw new Error(loaded.problems.join("\n"));
    expect(loaded.config.workspace).toEqual({ isolation, engine });
    expect(loaded.warnings).toHaveLength(1);
    const [warning] = loaded.warnings;
    for (const [name, value] of Object.entries(env)) expect(warning).toContain(`${name}=${value}`);
    expect(warning).toContain(`WORKSPACE_ISOLATION=${isolation} WORKSPACE_ENGINE=${engine}`);
  });

  it("reads a complete configuration", () => {
    expect(
      config({
        ...app,
        DATABASE_URL: "postgres://u:p@db:5432/x",
        DATA_DIR: "/var/lib/vmpilot",
        LOG_LEVEL: "DEBUG",
        HOST: "0.0.0.0",
        PORT: "8080",
        GHE_HOST: "github.example.com",
        GHE_PROTOCOL: "http",
        VMPILOT_LABEL: "ai",
        VMPILOT_COMMAND: "pilot",
        WORKER_CONCURRENCY: "4",
        SPARE_CHECKOUTS: "0",
        SHUTDOWN_DRAIN_SECONDS: "5",
        INSTALLATION_SYNC_MINUTES: "0",
        PUBLIC_URL: "https://pilot.example.com/",
        ALLOWED_USERS: " alice, bob-2 ,,",
        NETWORK_ALLOW_PRIVATE: "10.1.0.0/16, fd00::/8,192.168.5.7",
        SANDBOX_MAX_PROCESSES: "256",
        SANDBOX_MAX_MEMORY_MB: "2048",
        SANDBOX_MAX_FILE_MB: "100",
        SANDBOX_MAX_DISK_MB: "5000",
        NODE_ENV: "production",
      }),
    ).toMatchObject({
      appId: 123,
      privateKey: key,
      webhookSecret: "s3cret-value",
      databaseUrl: "postgres://u:p@db:5432/x",
      dataDir: "/var/lib/vmpilot",
      logLevel: "debug",
      logFormat: "json",
      host: "0.0.0.0",
      port: 8080,
      baseUrl: "http://github.example.com/api/v3",
      label: "ai",
      command: "pilot",
      workerConcurrency: 4,
      spareCheckouts: 0,
      shutdownDrainSeconds: 5,
      installationSyncMinutes: 0,
      publicUrl: "https://pilot.example.com",
      allowedUsers: ["alice", "bob-2"],
      networkAllowPrivate: ["10.1.0.0/16", "fd00::/8", "192.168.5.7"],
      sandboxLimits: { processes: 256, memoryMb: 2048, fileMb: 100, diskMb: 5000 },
      production: true,
    });
  });

  const keyForms: Array<[string, Env]> = [
    ["escaped newlines", { PRIVATE_KEY: key.replaceAll("\n", "\\n") }],
    ["base64", { PRIVATE_KEY: Buffer.from(key).toString("base64") }],
  ];
  it.each(keyForms)("accepts a private key with %s", (_name, env) => {
    expect(config({ ...app, ...env }).privateKey?.trim()).toBe(key.trim());
  });

  it("reads METRICS_TOKEN and refuses one too short to guard /metrics", () => {
    expect(config({ ...app, METRICS_TOKEN: "0123456789abcdef" }).metricsToken).toBe(
      "0123456789abcdef",
    );
    expect(config({ ...app }).metricsToken).toBeUndefined();
    expect(problems({ ...app, METRICS_TOKEN: "short" })).toEqual([
      expect.stringMatching(/^METRICS_TOKEN: must be at least 16 characters/),
    ]);
    expect(problems({ ...app, SANDBOX_MAX_DISK_MB: "lots" })).toHaveLength(1);
  });

  it("reads PRIVATE_KEY_PATH", () => {
    const dir = mkdtempSync(join(tmpdir(), "vmpilot-env-"));
    writeFileSync(join(dir, "app.pem"), key);
    expect(
      config({ APP_ID: "1", WEBHOOK_SECRET: "x", PRIVATE_KEY_PATH: join(dir, "app.pem") })
        .privateKey,
    ).toBe(key);
  });

  const bad: Array<[string, Env, string[]]> = [
    ["port", { PORT: "http" }, ["PORT: must be an integer from 0 to 65535"]],
    ["port range", { PORT: "70000" }, ["PORT: must be at most 65535"]],
    [
      "log level",
      { LOG_LEVEL: "loud" },
      ["LOG_LEVEL: must be one of trace, debug, info, warn, error, fatal, silent"],
    ],
    ["database url", { DATABASE_URL: "mysql://x" }, ["DATABASE_URL: must be a postgres:// URL"]],
    ["app id", { APP_ID: "abc" }, ["APP_ID: must be the numeric GitHub App id"]],
    [
      "command word",
      { VMPILOT_COMMAND: "/Pilot" },
      ["VMPILOT_COMMAND: must be a lowercase word such as vmpilot"],
    ],
    ["concurrency", { WORKER_CONCURRENCY: "0" }, ["WORKER_CONCURRENCY: must be at least 1"]],
    [
      "allowed users",
      { ALLOWED_USERS: "alice,bad user" },
      ["ALLOWED_USERS: must be comma-separated GitHub logins"],
    ],
    [
      "private ranges",
      { NETWORK_ALLOW_PRIVATE: "10.0.0.0/8,intranet" },
      [
        "NETWORK_ALLOW_PRIVATE: must be comma-separated address ranges such as 10.1.0.0/16,fd00::/8",
      ],
    ],
    [
      "app without key and secret",
      { APP_ID: "1" },
      [
        "PRIVATE_KEY: is required when APP_ID is set (or set PRIVATE_KEY_PATH)",
        "WEBHOOK_SECRET: is required when APP_ID is set",
      ],
    ],
    [
      "garbage key",
      { ...app, PRIVATE_KEY: "-----BEGIN nonsense" },
      ["PRIVATE_KEY: is not a PEM-encoded private key (download it from the app settings)"],
    ],
    [
      "missing key file",
      { ...app, PRIVATE_KEY: "", PRIVATE_KEY_PATH: "/nonexistent/key.pem" },
      ["PRIVATE_KEY_PATH: no file at /nonexistent/key.pem"],
    ],
    [
      "production without an app",
      { NODE_ENV: "production" },
      ["APP_ID: is required in production (NODE_ENV=production)"],
    ],
    [
      "OAuth client id without its secret",
      { ...app, GITHUB_CLIENT_ID: "Iv1.abc" },
      ["GITHUB_CLIENT_SECRET: GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET go together"],
    ],
    [
      "short session secret",
      { ...app, SESSION_SECRET: "short" },
      ["SESSION_SECRET: must be at least 32 characters (e.g. openssl rand -hex 32)"],
    ],
    [
      "vm isolation without a VM engine",
      { WORKSPACE_ISOLATION: "vm" },
      ["WORKSPACE_ISOLATION: vm needs WORKSPACE_ENGINE set to fly or kubernetes"],
    ],
    [
      "isolation none, which only the CLI may ask for",
      { WORKSPACE_ISOLATION: "none" },
      ["WORKSPACE_ISOLATION: must be sandbox or vm"],
    ],
    [
      "engine",
      { WORKSPACE_ENGINE: "docker" },
      ["WORKSPACE_ENGINE: must be local, fly or kubernetes"],
    ],
    [
      "old provider",
      { WORKSPACE_PROVIDER: "host" },
      ["WORKSPACE_PROVIDER: must be sandbox, agent, fly or kubernetes"],
    ],
    [
      "old and new names at once",
      { WORKSPACE_PROVIDER: "fly", WORKSPACE_ENGINE: "kubernetes" },
      [
        "WORKSPACE_PROVIDER: replaced by WORKSPACE_ISOLATION and WORKSPACE_ENGINE, which are set too: drop WORKSPACE_PROVIDER",
      ],
    ],
    [
      "several at once",
      { PORT: "x", LOG_LEVEL: "y", GHE_PROTOCOL: "ftp" },
      [
        "LOG_LEVEL: must be one of trace, debug, info, warn, error, fatal, silent",
        "PORT: must be an integer from 0 to 65535",
        "GHE_PROTOCOL: must be http or https",
      ],
    ],
  ];
  it.each(bad)("reports a bad %s", (_name, env, expected) => {
    expect(problems(env)).toEqual(expected);
  });

  it("reads the OAuth client for the web pages", () => {
    const secret = "0123456789abcdef0123456789abcdef";
    expect(
      config({
        GITHUB_CLIENT_ID: "Iv1.abc",
        GITHUB_CLIENT_SECRET: "shh",
        SESSION_SECRET: secret,
        GHE_HOST: "ghe.example.com",
      }),
    ).toMatchObject({
      oauth: { clientId: "Iv1.abc", clientSecret: "shh" },
      sessionSecret: secret,
      githubWebUrl: "https://ghe.example.com",
    });
  });

  it("never echoes a secret value in a problem", () => {
    const lines = problems({ ...app, PRIVATE_KEY: "super-secret-not-a-key" });
    expect(lines.join("\n")).not.toContain("super-secret");
  });
});

describe("VARIABLES", () => {
  it("reads each variable into one field only", () => {
    expect(new Set(VARIABLES).size).toBe(VARIABLES.length);
  });

  it("are all documented on the configuration page", () => {
    const page = readFileSync(join(ROOT, "docs/configuration.md"), "utf8");
    expect(VARIABLES.filter((variable) => !page.includes(`\`${variable}\``))).toEqual([]);
  });
});

describe("loadDotEnv", () => {
  it("fills unset variables from .env without overriding the environment", () => {
    const dir = mkdtempSync(join(tmpdir(), "vmpilot-dotenv-"));
    writeFileSync(join(dir, ".env"), 'APP_ID=42\nPRIVATE_KEY="line1\\nline2"\nPORT=1\n');
    const env: Record<string, string | undefined> = { PORT: "2" };
    loadDotEnv(env, dir);
    expect(env).toEqual({ APP_ID: "42", PRIVATE_KEY: "line1\nline2", PORT: "2" });
  });
});

/** Runs `npm start`'s entry point in a child process. */
function start(env: Env, args: string[] = []) {
  return spawn(process.execPath, ["bin/start.js", ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NO_SMEE_SETUP: "true", ...env },
  });
}

async function exited(child: ReturnType<typeof start>) {
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
  });
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  const code = await new Promise<number | null>((done) => child.on("exit", done));
  return { code, stdout, stderr };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as { port: number };
  await new Promise((done) => server.close(done));
  return port;
}

describe("npm start", () => {
  it("prints one line per configuration problem and exits 1 without a stack trace", async () => {
    const result = await exited(start({ PORT: "http", LOG_LEVEL: "loud", APP_ID: "1" }));
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split("\n")).toEqual([
      "vmpilot: invalid configuration: LOG_LEVEL: must be one of trace, debug, info, warn, error, fatal, silent",
      "vmpilot: invalid configuration: PORT: must be an integer from 0 to 65535",
    ]);
  });

  it("tells a mistake in the configuration before it loads the server", async () => {
    const file = join(mkdtempSync(join(tmpdir(), "vmpilot-start-")), "modules");
    const preload = join(ROOT, "test", "helpers", "loaded-modules.mjs");
    const watched = { NODE_OPTIONS: `--import ${preload}`, LOADED_MODULES_FILE: file };
    const result = await exited(start({ ...app, PORT: "http", ...watched }));
    expect(result.code).toBe(1);
    const modules = readFileSync(file, "utf8").split("\n");
    expect(modules.filter((url) => url.endsWith("/src/config/env.ts"))).toHaveLength(1);
    expect(modules.filter((url) => /\/src\/main\.ts$|\/node_modules\/probot\//.test(url))).toEqual(
      [],
    );
  });

  it("refuses to run jobs without an Anthropic key", async () => {
    const result = await exited(start({ ...app }, ["--role", "worker"]));
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(
      "vmpilot: invalid configuration: ANTHROPIC_API_KEY: is required to run jobs on Anthropic's models (or set VMPILOT_MODEL to another provider's model, or start with --role web)",
    );
  });

  it("names an unconfigured provider of VMPILOT_MODEL", async () => {
    const result = await exited(start({ ...app, VMPILOT_MODEL: "ollama/qwen3-coder:30b" }, []));
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      'VMPILOT_MODEL: the model ollama/qwen3-coder:30b is served by "ollama", which is not configured (configured: anthropic)',
    );
  });

  it("rejects an unknown role", async () => {
    const result = await exited(start({ ...app }, ["--role", "cook"]));
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(
      'vmpilot: failed to start: --role must be one of web, worker, all, not "cook"',
    );
  });

  it("says once at start what the old workspace variables are read as", async () => {
    const old = { WORKSPACE_PROVIDER: "agent", WORKSPACE_VM_PROVIDER: "fly" };
    const result = await exited(start({ ...app, ...old }, ["--role", "cook"]));
    expect(result.stderr.trim().split("\n")).toEqual([
      "vmpilot: WORKSPACE_PROVIDER=agent and WORKSPACE_VM_PROVIDER=fly are read as WORKSPACE_ISOLATION=sandbox WORKSPACE_ENGINE=fly: set those instead (the old names will go)",
      'vmpilot: failed to start: --role must be one of web, worker, all, not "cook"',
    ]);
  });

  it("shows Probot's setup page from app.yml when APP_ID is unset", async () => {
    const port = await freePort();
    const child = start({ HOST: "127.0.0.1", PORT: String(port), LOG_FORMAT: "json" });
    try {
      await new Promise<void>((ready, fail) => {
        let out = "";
        child.stdout.on("data", (chunk) => {
          out += chunk;
          if (out.includes("Listening on")) ready();
        });
        child.on("exit", (code) => fail(new Error(`exited with ${code}: ${out}`)));
      });
      const root = await fetch(`http://127.0.0.1:${port}/`, { redirect: "manual" });
      expect(root.status).toBe(302);
      expect(root.headers.get("location")).toBe("/probot");
      const page = await fetch(`http://127.0.0.1:${port}/probot`);
      expect(page.status).toBe(200);
      const html = await page.text();
      expect(html).toContain("https://github.com/settings/apps/new");
      const manifest = JSON.parse(
        /name="manifest" id="manifest" value='([^']*)'/.exec(html)?.[1] ?? "",
      );
      expect(manifest).toMatchObject({
        name: "vmpilot",
        default_events: [
          "issues",
          "issue_comment",
          "pull_request",
          "pull_request_review",
          "pull_request_review_comment",
          "push",
          "check_run",
          "check_suite",
          "workflow_run",
          "status",
        ],
        default_permissions: {
          contents: "write",
          issues: "write",
          pull_requests: "write",
          checks: "write",
          actions: "read",
          statuses: "read",
          metadata: "read",
        },
        redirect_url: `http://127.0.0.1:${port}/probot/setup`,
      });
    } finally {
      const gone = new Promise((done) => child.once("exit", done));
      child.kill("SIGTERM");
      await gone;
    }
  });
});
