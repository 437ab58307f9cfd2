// The newcomer's second step: the .env that Probot's setup page writes, plus an Anthropic key.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appPrivateKey } from "../helpers/app.ts";
import { seedDataDir } from "../helpers/db.ts";

describe("npm start with the .env of Probot's setup page", () => {
  let root: string;
  const github = createServer((req, res) => {
    res.writeHead(req.url === "/api/v3/app" ? 200 : 404, { "content-type": "application/json" });
    res.end(
      JSON.stringify({ id: 1, slug: "vmpilot-test", name: "vmpilot", owner: { login: "o" } }),
    );
  });
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "vmpilot-setup-env-"));
    await seedDataDir(join(root, "data"));
    await new Promise<void>((done) => github.listen(0, "127.0.0.1", done));
  });
  afterAll(async () => {
    await new Promise((done) => github.close(done));
    await rm(root, { recursive: true, force: true });
  });

  it("starts without SESSION_SECRET, and keeps the generated one across restarts", async () => {
    const { port } = github.address() as AddressInfo;
    const env = {
      HOME: process.env.HOME,
      PATH: process.env.PATH,
      APP_ID: "123",
      PRIVATE_KEY: appPrivateKey(),
      WEBHOOK_SECRET: "from-the-setup-page",
      GITHUB_CLIENT_ID: "Iv1.0123456789abcdef",
      GITHUB_CLIENT_SECRET: "0123456789abcdef0123456789abcdef01234567",
      ANTHROPIC_API_KEY: "sk-ant-test",
      GHE_HOST: `127.0.0.1:${port}`,
      GHE_PROTOCOL: "http",
      DATA_DIR: join(root, "data"),
      HOST: "127.0.0.1",
      PORT: "0",
      LOG_FORMAT: "json" as const,
    };
    const secrets: string[] = [];
    for (let run = 0; run < 2; run++) {
      const child = spawn(process.execPath, ["bin/start.js", "--role", "web"], {
        cwd: new URL("../../", import.meta.url).pathname,
        env,
      });
      let stderr = "";
      child.stderr.on("data", (chunk) => {
        stderr += chunk;
      });
      try {
        const started = await new Promise<string>((resolve, reject) => {
          let out = "";
          child.stdout.on("data", (chunk) => {
            out += chunk;
            const line = out.split("\n").find((l) => l.includes('"vmpilot started"'));
            if (line) resolve(JSON.parse(line).url);
          });
          child.on("exit", (code) => reject(new Error(`exited with ${code}: ${stderr}`)));
        });
        expect((await fetch(`${started}/healthz`)).status).toBe(200);
      } finally {
        const gone = new Promise((done) => child.once("exit", done));
        child.kill("SIGTERM");
        await gone;
      }
      // The embedded database is closed now: read what the run stored.
      const { openDatabase } = await import("../../src/store/database.ts");
      const db = await openDatabase({ dataDir: join(root, "data") });
      try {
        const { rows } = await db.pool.query(
          "SELECT value FROM app_secrets WHERE name = 'web-session'",
        );
        secrets.push(rows[0]?.value);
      } finally {
        await db.close();
      }
    }
    expect(secrets[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(secrets[1]).toBe(secrets[0]);
  }, 120_000);
});
