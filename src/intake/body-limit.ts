// Webhook bodies are read here, capped, before Probot sees them: a forged POST could otherwise
// be buffered whole in memory. Probot's middleware takes a string `req.body` as the raw payload.
import type { IncomingMessage, ServerResponse } from "node:http";
import { readCapped, refuse } from "../web/capped-body.ts";

/** GitHub caps webhook payloads at 25 MB. */
const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;

type Handler = (req: IncomingMessage, res: ServerResponse) => unknown;

/** Wraps the webhook middleware: 413 over `limit` bytes, else `next` with the body read. */
export function capWebhookBody(path: string, next: Handler, limit = MAX_WEBHOOK_BYTES): Handler {
  return async (req, res) => {
    if (req.method !== "POST" || new URL(req.url ?? "/", "http://x").pathname !== path) {
      return next(req, res);
    }
    const declared = Number(req.headers["content-length"] ?? 0);
    if (declared > limit) return refuse(res, 413, { error: "payload too large" });
    const body = await readCapped(req, limit);
    if (body === undefined) return refuse(res, 413, { error: "payload too large" });
    // Not parsed here: Probot checks the signature first, then answers malformed JSON with 400.
    Object.assign(req, { body: body.toString("utf8") });
    return next(req, res);
  };
}
