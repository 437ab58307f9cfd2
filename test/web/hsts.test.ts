import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { mountWeb } from "../../src/web/index.ts";

// Never connected: the home page does not touch the database.
const pool = new pg.Pool({ connectionString: "postgres://127.0.0.1:1/none" });
afterAll(() => pool.end());

async function homeHeaders(publicUrl: string): Promise<Headers> {
  const web = mountWeb({
    db: { pool },
    config: {
      publicUrl,
      sessionSecret: randomBytes(32).toString("hex"),
      oauth: null,
      githubApiUrl: "http://127.0.0.1:1/api/v3",
      githubWebUrl: "http://127.0.0.1:1",
    },
  });
  const server = createServer(async (req, res) => {
    if (!(await web.handler(req, res))) res.writeHead(404).end();
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  try {
    const { port } = server.address() as AddressInfo;
    return (await fetch(`http://127.0.0.1:${port}/`)).headers;
  } finally {
    web.close();
    await new Promise((done) => server.close(done));
  }
}

describe("Strict-Transport-Security", () => {
  it("is sent when the app is served over https", async () => {
    const headers = await homeHeaders("https://vmpilot.example");
    expect(headers.get("strict-transport-security")).toBe("max-age=31536000");
  });

  it("is not sent over plain http, where browsers ignore it", async () => {
    const headers = await homeHeaders("http://127.0.0.1:3000");
    expect(headers.get("strict-transport-security")).toBeNull();
  });
});
