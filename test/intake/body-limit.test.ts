// Oversize and malformed webhook bodies, POSTed to the real t.server.
import { execFile } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { capWebhookBody } from "../../src/intake/body-limit.ts";
import { createLogger } from "../../src/log/logger.ts";
import { WEBHOOK_PATH } from "../../src/main.ts";
import { testConfig, WEBHOOK_SECRET } from "../helpers/app.ts";
import { useGitHubMock } from "../helpers/github-mock.ts";
import { useTestServer } from "../helpers/test-server.ts";
import { signature } from "../helpers/webhooks.ts";

useGitHubMock();

const run = promisify(execFile);
const MB = 1024 * 1024;
// Over the 25 MB cap by more than the socket buffers of a loopback connection hold.
const OVERSIZE = 40 * MB;
const MARKER = "forged-payload-marker";
const lines: string[] = [];
const t = useTestServer({
  config: testConfig({ logLevel: "debug" }),
  logger: createLogger({
    level: "debug",
    format: "json",
    destination: { write: (l) => lines.push(l) },
  }),
});

const RAW_POST = fileURLToPath(new URL("../helpers/raw-post.ts", import.meta.url));

/** POSTs `total` bytes from a child process; see test/helpers/raw-post.ts. */
async function post(
  total: number,
  contentLength?: number,
): Promise<{ status: number | null; sent: number }> {
  const args = [
    t.server.url + WEBHOOK_PATH,
    signature(MARKER, WEBHOOK_SECRET),
    MARKER,
    String(total),
  ];
  if (contentLength !== undefined) args.push(String(contentLength));
  const { stdout } = await run(process.execPath, [RAW_POST, ...args]);
  return z.object({ status: z.number().nullable(), sent: z.number() }).parse(JSON.parse(stdout));
}

describe("webhook body cap", () => {
  it("answers 413 to a chunked body over 25 MB", async () => {
    const { status, sent } = await post(OVERSIZE);
    expect(status).toBe(413);
    // The server stopped reading at the cap: the rest never left the client.
    expect(sent).toBeLessThan(OVERSIZE);
    expect(lines.join("")).not.toContain(MARKER);
  });

  it("answers 413 to an honest Content-Length over 25 MB", async () => {
    // The headers alone: an answer that waited for body bytes would never come.
    const { status, sent } = await post(0, OVERSIZE);
    expect(status).toBe(413);
    expect(sent).toBe(0);
  });

  it("answers 413 to a body longer than its lying Content-Length", async () => {
    const { status } = await post(30 * MB, 30 * MB - 1);
    expect([400, 413]).toContain(status);
  });

  it("answers 400 to signed malformed JSON without logging it", async () => {
    // Probot answers it after the signature check. V8's message for this error quotes the text
    // around the bad token; Probot replaces the message before the stack is formatted.
    const body = `{"a": ${MARKER}}`;
    const response = await fetch(`${t.server.url}${WEBHOOK_PATH}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "issue_comment",
        "x-github-delivery": "malformed-1",
        "x-hub-signature-256": signature(body, WEBHOOK_SECRET),
      },
      body,
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: "SyntaxError: Invalid JSON" });
    const logged = lines.join("");
    expect(logged).toContain("Invalid JSON");
    expect(logged).not.toContain(MARKER);
  });

  it("logs nothing of a 1 MB body with a bad signature", async () => {
    const body = JSON.stringify({ comment: { body: MARKER.repeat(MB / MARKER.length) } });
    const response = await fetch(`${t.server.url}${WEBHOOK_PATH}`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "issue_comment",
        "x-github-delivery": "bad-signature-1",
        "x-hub-signature-256": signature("another body", WEBHOOK_SECRET),
      },
      body,
    });
    expect(response.status).toBe(400);
    const logged = lines.join("");
    expect(logged).toContain("bad-signature-1");
    expect(logged).not.toContain(MARKER);
  });
});

describe("webhook bytes in flight", () => {
  it("answers 503 with Retry-After while other deliveries hold the cap, and takes the next once they are done", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let arrived: () => void = () => {};
    const first = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const seen: string[] = [];
    const handler = capWebhookBody(
      "/hook",
      async (req, res) => {
        seen.push(String((req as { body?: unknown }).body).slice(0, 1));
        arrived();
        await gate;
        res.end("ok");
      },
      { body: 1000, inFlight: 1500 },
    );
    const server = createServer((req, res) => void handler(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    const send = (fill: string) => fetch(url, { method: "POST", body: fill.repeat(900) });
    try {
      const held = send("a");
      await first;
      // 900 bytes held; 900 more would pass 1500.
      const refused = await send("b");
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("5");
      release();
      expect((await held).status).toBe(200);
      expect((await send("c")).status).toBe(200);
      expect(seen).toEqual(["a", "c"]);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
