// Senders that announce a large body and send a byte of it: the intake counts what has arrived,
// cuts off a sender that stalls, and records signed deliveries meanwhile. The senders are raw
// sockets in this process, so this file has no nock (it holds a raw socket's writes back) and
// GitHub's one GET /app at startup is a loopback fake.
import { once } from "node:events";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { type AddressInfo, connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { capWebhookBody, type WebhookBodyLimits } from "../../src/intake/body-limit.ts";
import { type RunningServer, WEBHOOK_PATH } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { APP_SLUG, startTestServer, testConfig, WEBHOOK_SECRET } from "../helpers/app.ts";
import { openTestDatabase } from "../helpers/db.ts";
import { deliver, examplePayload, signature } from "../helpers/webhooks.ts";

const MB = 1024 * 1024;

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * A webhook POST on a connection of its own that announces `length` bytes and sends `sent`.
 * Resolves once written; `reply` resolves to what the server answered by the time it closed.
 */
async function post(url: string, length: number | "chunked", sent: string, head = "") {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let answer = "";
  socket.on("data", (data) => {
    answer += data.toString("latin1");
  });
  socket.on("error", () => {});
  const reply = once(socket, "close").then(() => answer);
  const framing = length === "chunked" ? "transfer-encoding: chunked" : `content-length: ${length}`;
  socket.write(`POST ${WEBHOOK_PATH} HTTP/1.1\r\nhost: x\r\n${framing}\r\n${head}\r\n`);
  await new Promise((resolve) => socket.write(sent, resolve));
  return { socket, reply };
}

describe("the intake with senders holding connections", () => {
  let db: Database;
  let server: RunningServer;
  let github: Server;
  beforeAll(async () => {
    github = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: 1, slug: APP_SLUG }));
    });
    const baseUrl = `${await listen(github)}/api/v3`;
    db = await openTestDatabase();
    server = await startTestServer(db, { role: "web", config: testConfig({ baseUrl }) });
  });
  afterAll(async () => {
    await server?.close();
    await db?.close();
    github?.close();
  });

  const recorded = async (deliveryId: string) =>
    (await db.pool.query("SELECT 1 FROM deliveries WHERE id = $1", [deliveryId])).rows.length;

  function command(text: string) {
    const payload = examplePayload("issue_comment", "created");
    payload.installation = { id: 4242 };
    payload.comment.body = text;
    return payload;
  }

  it("records a signed delivery while 100 senders hold 16 MiB announced and 1 byte sent each", async () => {
    // Counted as announced, four of them held the 64 MiB in flight and the rest were refused.
    const held = await Promise.all(
      Array.from({ length: 100 }, () => post(server.url, 16 * MB, "{")),
    );
    let cut = 0;
    for (const { reply } of held) void reply.then(() => cut++);
    const response = await deliver(server.url, {
      event: "issue_comment",
      payload: command("/vmpilot fix the typo in the README"),
      secret: WEBHOOK_SECRET,
    });
    expect(response.status).toBe(200);
    expect(await recorded(response.id)).toBe(1);
    // Recorded without waiting for any of them to be cut off (the idle timeout is 5 s).
    expect(cut).toBe(0);
    for (const { socket } of held) socket.destroy();
  });

  it("answers 413 to a signed delivery streamed over 25 MiB, and records nothing", async () => {
    const body = JSON.stringify(command(`/vmpilot ${"x".repeat(26 * MB)}`));
    const head =
      "content-type: application/json\r\nx-github-event: issue_comment\r\n" +
      `x-github-delivery: oversize-streamed\r\nx-hub-signature-256: ${signature(body, WEBHOOK_SECRET)}\r\n`;
    const size = Buffer.byteLength(body);
    const chunked = `${size.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const { reply } = await post(server.url, "chunked", chunked, head);
    const answer = await reply;
    expect(answer).toMatch(/^HTTP\/1.1 413/);
    expect(answer).toContain("payload too large: a webhook body holds at most 26214400 bytes");
    expect(await recorded("oversize-streamed")).toBe(0);
  });
});

describe("capWebhookBody", () => {
  /** A server whose webhook handler holds each body until `release`, after noting it. */
  async function serve(limits: WebhookBodyLimits, header?: string) {
    const seen: string[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let arrived: () => void = () => {};
    const first = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const handler = capWebhookBody(
      "/api/github/webhooks",
      async (req: IncomingMessage, res) => {
        seen.push(String((req as { body?: unknown }).body).slice(0, 1));
        arrived();
        await gate;
        res.end("ok");
      },
      limits,
      header,
    );
    const server = createServer((req, res) => void handler(req, res));
    const url = await listen(server);
    const close = () => {
      release();
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    };
    return { url, seen, release, first, close };
  }

  it("cuts off a sender that stalls with 408, and no longer counts its bytes", async () => {
    const s = await serve({ body: 1000, inFlight: 1000, idleMs: 20, bodyMs: 60_000 });
    try {
      const stalled = await post(s.url, 1000, "s".repeat(800));
      const answer = await stalled.reply;
      expect(answer).toMatch(/^HTTP\/1.1 408/);
      expect(answer).toContain("webhook body stalled");
      // 800 bytes still counted would leave no room for 900 more.
      s.release();
      const next = await post(s.url, 900, "n".repeat(900));
      next.socket.end();
      expect(await next.reply).toMatch(/^HTTP\/1.1 200/);
      expect(s.seen).toEqual(["n"]);
    } finally {
      await s.close();
    }
  });

  it("cuts off a body that takes longer than its time with 408", async () => {
    const s = await serve({ body: 1000, idleMs: 20, bodyMs: 20 });
    try {
      const slow = await post(s.url, 1000, "s");
      const answer = await slow.reply;
      expect(answer).toMatch(/^HTTP\/1.1 408/);
      expect(answer).toContain("webhook body too slow");
      expect(s.seen).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it("answers 429 to one address over its share while another address is served", async () => {
    const s = await serve({ body: 1000, inFlight: 10_000, perAddress: 1000 }, "x-real-ip");
    try {
      const held = await post(s.url, 900, "a".repeat(900), "x-real-ip: 192.0.2.1\r\n");
      await s.first;
      const same = await post(s.url, 200, "b".repeat(200), "x-real-ip: 192.0.2.1\r\n");
      const refused = await same.reply;
      expect(refused).toMatch(/^HTTP\/1.1 429/);
      expect(refused).toContain("retry-after: 5");
      expect(refused).toContain("too many webhook bytes from one address");
      const other = await post(s.url, 900, "c".repeat(900), "x-real-ip: 198.51.100.7\r\n");
      s.release();
      held.socket.end();
      other.socket.end();
      expect(await held.reply).toMatch(/^HTTP\/1.1 200/);
      expect(await other.reply).toMatch(/^HTTP\/1.1 200/);
      expect(s.seen).toEqual(["a", "c"]);
    } finally {
      await s.close();
    }
  });
});
