// Webhook bodies are read here, capped, before Probot sees them: a forged POST could otherwise
// be buffered whole in memory. Probot's middleware takes a string `req.body` as the raw payload.
import type { IncomingMessage, ServerResponse } from "node:http";
import { readCapped, refuse } from "../http/capped-body.ts";

/** GitHub caps webhook payloads at 25 MB. */
const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;
/**
 * Webhook bytes held at once across all requests, from the first byte read until the delivery is
 * handled: many large posts in parallel would otherwise each hold up to the per-body cap.
 */
const MAX_BYTES_IN_FLIGHT = 64 * 1024 * 1024;
/** Seconds a sender is asked to wait when the server holds its most. */
const RETRY_AFTER_SECONDS = 5;

type Handler = (req: IncomingMessage, res: ServerResponse) => unknown;

export interface WebhookBodyLimits {
  /** One body's bytes. */
  body?: number;
  /** All bodies' bytes at once. */
  inFlight?: number;
}

/**
 * Wraps the webhook middleware: 413 over the body cap, 503 with Retry-After while other
 * deliveries hold the in-flight cap, else `next` with the body read.
 */
export function capWebhookBody(
  path: string,
  next: Handler,
  limits: WebhookBodyLimits = {},
): Handler {
  const limit = limits.body ?? MAX_WEBHOOK_BYTES;
  const inFlight = limits.inFlight ?? MAX_BYTES_IN_FLIGHT;
  let held = 0;
  return async (req, res) => {
    if (req.method !== "POST" || new URL(req.url ?? "/", "http://x").pathname !== path) {
      return next(req, res);
    }
    const declared = Number(req.headers["content-length"] ?? 0);
    if (declared > limit) return refuse(res, 413, { error: "payload too large" });
    // Bytes are counted as they are announced or arrive, so a body without a length is held too.
    let reserved = 0;
    const reserve = (size: number) => {
      if (size <= reserved) return true;
      if (held + size - reserved > inFlight) return false;
      held += size - reserved;
      reserved = size;
      return true;
    };
    const busy = () =>
      refuse(
        res,
        503,
        { error: "too many webhook bytes in flight; retry later" },
        { "retry-after": String(RETRY_AFTER_SECONDS) },
      );
    try {
      if (!reserve(Number.isFinite(declared) ? declared : 0)) return busy();
      let refused = false;
      const body = await readCapped(req, limit, (size) => {
        refused = !reserve(size);
        return !refused;
      });
      if (body === undefined)
        return refused ? busy() : refuse(res, 413, { error: "payload too large" });
      // Not parsed here: Probot checks the signature first, then answers malformed JSON with 400.
      Object.assign(req, { body: body.toString("utf8") });
      return await next(req, res);
    } finally {
      held -= reserved;
    }
  };
}
