// Oversize and malformed webhook bodies, POSTed over a real socket to the real server.
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/github/logger.ts";
import { type RunningServer, WEBHOOK_PATH } from "../../src/main.ts";
import { type Database, openDatabase } from "../../src/store/database.ts";
import { APP_SLUG, startTestServer, testConfig, WEBHOOK_SECRET } from "../helpers/app.ts";
import { expectGitHubDone, mockApp, useGitHubMock } from "../helpers/github-mock.ts";
import { signature } from "../helpers/webhooks.ts";

useGitHubMock();

const MB = 1024 * 1024;
const MARKER = "forged-payload-marker";
const lines: string[] = [];
let db: Database;
let server: RunningServer;

beforeAll(async () => {
  db = await openDatabase({ dataDir: "memory://" });
  mockApp(APP_SLUG);
  const config = testConfig({ logLevel: "debug" });
  server = await startTestServer(db, {
    config,
    logger: createLogger({
      level: "debug",
      format: "json",
      destination: { write: (l) => lines.push(l) },
    }),
  });
  expectGitHubDone();
});

afterAll(async () => {
  await server?.close();
  await db?.close();
});

/**
 * Streams `total` bytes in 1 MB chunks over a raw socket (chunked unless a Content-Length is
 * given) until the server answers or closes; returns the status line's code and bytes sent.
 */
function post(total: number, contentLength?: number): Promise<{ status: number; sent: number }> {
  return new Promise((resolve) => {
    const chunk = Buffer.alloc(MB, `"${MARKER}"`);
    const { port } = new URL(server.url);
    const socket = connect(Number(port), "127.0.0.1");
    const length =
      contentLength === undefined
        ? "transfer-encoding: chunked"
        : `content-length: ${contentLength}`;
    socket.write(
      `POST ${WEBHOOK_PATH} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n` +
        `x-github-event: issue_comment\r\nx-github-delivery: oversize-1\r\n` +
        `x-hub-signature-256: ${signature(MARKER, WEBHOOK_SECRET)}\r\n${length}\r\n\r\n`,
    );
    let sent = 0;
    let reply = "";
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      socket.destroy();
      resolve({ status: Number(reply.split(" ")[1]), sent });
    };
    socket.on("data", (data) => {
      reply += data.toString();
      if (reply.includes("\r\n")) finish();
    });
    socket.on("close", finish);
    socket.on("error", finish);
    // Each chunk waits until it left for the socket, so `sent` is what the server could have read.
    const pump = () => {
      if (done || socket.destroyed) return;
      if (sent >= total) return void socket.end(contentLength === undefined ? "0\r\n\r\n" : "");
      sent += chunk.length;
      const framed =
        contentLength === undefined ? [`${chunk.length.toString(16)}\r\n`, chunk, "\r\n"] : [chunk];
      for (const part of framed.slice(0, -1)) socket.write(part);
      socket.write(framed.at(-1) as Buffer | string, (error) => (error ? finish() : pump()));
    };
    pump();
  });
}

describe("webhook body cap", () => {
  it("answers 413 to a chunked body over 25 MB", async () => {
    const { status } = await post(200 * MB);
    expect(status).toBe(413);
    expect(lines.join("")).not.toContain(MARKER);
  });

  it("answers 413 to an honest Content-Length over 25 MB", async () => {
    const { status } = await post(200 * MB, 200 * MB);
    expect(status).toBe(413);
  });

  it("answers 413 to a body longer than its lying Content-Length", async () => {
    const { status } = await post(30 * MB, 30 * MB - 1);
    expect([400, 413]).toContain(status);
  });

  it("answers 400 to malformed JSON without logging it", async () => {
    const body = `{"${MARKER}": `;
    const response = await fetch(`${server.url}${WEBHOOK_PATH}`, {
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
    expect(lines.join("")).not.toContain(MARKER);
  });

  it("logs nothing of a 1 MB body with a bad signature", async () => {
    const body = JSON.stringify({ comment: { body: MARKER.repeat(MB / MARKER.length) } });
    const response = await fetch(`${server.url}${WEBHOOK_PATH}`, {
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
