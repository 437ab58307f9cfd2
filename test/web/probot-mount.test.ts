import { generateKeyPairSync, randomBytes } from "node:crypto";
import { createServer } from "node:net";
import pg from "pg";
import pino from "pino";
import { Probot, Server } from "probot";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mountWeb, type Web } from "../../src/web/index.ts";

// The wiring the server uses: mountWeb's handler added to Probot 14's Server.
describe("mountWeb on Probot's server", () => {
  let server: Server;
  let web: Web;
  let pool: pg.Pool;
  let base: string;

  beforeAll(async () => {
    const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    // Probot turns port 0 into 3000, so pick a free port first.
    const port = await freePort();
    // Never connected: the pages requested below do not touch the database.
    pool = new pg.Pool({ connectionString: "postgres://127.0.0.1:1/none" });
    base = `http://127.0.0.1:${port}`;
    web = mountWeb({
      db: { pool },
      config: {
        publicUrl: base,
        sessionSecret: randomBytes(32).toString("hex"),
        oauth: null,
        githubApiUrl: "http://127.0.0.1:1/api/v3",
        githubWebUrl: "http://127.0.0.1:1",
      },
    });
    server = new Server({
      Probot: Probot.defaults({
        appId: 1,
        privateKey: privateKey.export({ type: "pkcs1", format: "pem" }).toString(),
        secret: "webhook-secret",
      }),
      host: "127.0.0.1",
      port,
      log: pino({ level: "silent" }),
    });
    server.addHandler(web.handler);
    await server.start();
  });

  afterAll(async () => {
    web.close();
    await server.stop();
    await pool.end();
  });

  it("serves the pages next to Probot's own routes", async () => {
    const home = await fetch(`${base}/`);
    expect(home.status).toBe(200);
    expect(await home.text()).toContain("Sign in with GitHub");
    expect((await fetch(`${base}/static/live.js`)).headers.get("content-type")).toMatch(
      /javascript/,
    );
    expect(await (await fetch(`${base}/ping`)).text()).toBe("PONG");
    // Unsigned webhook: Probot's middleware still owns its path.
    const hook = await fetch(`${base}/api/github/webhooks`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(hook.status).toBe(400);
    expect((await fetch(`${base}/nothing-here`)).status).toBe(404);
    expect((await fetch(`${base}/login`)).status).toBe(503);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}
