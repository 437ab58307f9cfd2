// Webhook bodies are read here, capped, before Probot sees them: a forged POST could otherwise
// be buffered whole in memory. Probot's middleware takes a string `req.body` as the raw payload.
import type { IncomingMessage, ServerResponse } from "node:http";

/** GitHub caps webhook payloads at 25 MB. */
const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;

type Handler = (req: IncomingMessage, res: ServerResponse) => unknown;

/** How long a refused connection stays half-open for its client to read the answer. */
const LINGER_MS = 1000;

function refuse(res: ServerResponse, status: number, error: string): true {
  // The rest of an oversize body is never read: the connection is closed instead of drained.
  // Closing a socket with unread input resets it, and the reset may reach the client before it
  // has read the answer; so the server half-closes first and cuts the connection a moment later.
  res.writeHead(status, { "content-type": "application/json" });
  // The socket is detached from `res` once the response finished; hold on to it.
  const socket = res.socket;
  res.end(JSON.stringify({ error }), () => {
    socket?.end();
    setTimeout(() => socket?.destroy(), LINGER_MS).unref();
  });
  return true;
}

/** Resolves to the body, or undefined once it passed `limit` bytes (the request is then abandoned). */
function readCapped(req: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        req.pause();
        resolve(undefined);
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.on("error", reject);
    req.on("end", () => resolve(Buffer.concat(chunks)));
  });
}

/** Wraps the webhook middleware: 413 over `limit` bytes, else `next` with the body read. */
export function capWebhookBody(path: string, next: Handler, limit = MAX_WEBHOOK_BYTES): Handler {
  return async (req, res) => {
    if (req.method !== "POST" || new URL(req.url ?? "/", "http://x").pathname !== path) {
      return next(req, res);
    }
    const declared = Number(req.headers["content-length"] ?? 0);
    if (declared > limit) return refuse(res, 413, "payload too large");
    const body = await readCapped(req, limit);
    if (body === undefined) return refuse(res, 413, "payload too large");
    // Not parsed here: Probot checks the signature first, then answers malformed JSON with 400.
    Object.assign(req, { body: body.toString("utf8") });
    return next(req, res);
  };
}
