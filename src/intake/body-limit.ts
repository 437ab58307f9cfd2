// Webhook bodies are read here, capped, before Probot sees them: a forged POST could otherwise
// be buffered whole in memory. Probot's middleware takes a string `req.body` as the raw payload.
// Nothing is known of a sender before its whole body is read (the signature covers the body), so
// a sender is held to what it has sent, not to what it announced: bytes count against the caps as
// they arrive, and a body that stalls or drags is cut off.
import type { IncomingMessage, ServerResponse } from "node:http";
import { readBody, refuse } from "../http/capped-body.ts";
import { clientAddress } from "../http/client-address.ts";
import { inSpan, SpanKind } from "../log/trace.ts";

/** GitHub caps webhook payloads at 25 MB. */
const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;
/**
 * Webhook bytes held at once across all requests, from the first byte read until the delivery is
 * handled: many large posts in parallel would otherwise each hold up to the per-body cap.
 */
const MAX_BYTES_IN_FLIGHT = 64 * 1024 * 1024;
/** One client address may hold half of that, so one sender alone cannot take it all. */
const MAX_BYTES_PER_ADDRESS = MAX_BYTES_IN_FLIGHT / 2;
/** GitHub sends a delivery's body at once; a sender silent this long is cut off. */
const IDLE_MS = 5_000;
/** Time for a whole body: 25 MB at under 1 MB/s. GitHub gives up on a delivery after 10 s. */
const BODY_MS = 30_000;
/** Seconds a sender is asked to wait when the server holds its most. */
const RETRY_AFTER_SECONDS = 5;

/** Answers to a sender over a cap: the one on all senders, or its own address's share. */
const BUSY = { status: 503, body: { error: "too many webhook bytes in flight; retry later" } };
const ADDRESS_BUSY = {
  status: 429,
  body: { error: "too many webhook bytes from one address; retry later" },
};
const RETRY = { "retry-after": String(RETRY_AFTER_SECONDS) };
const CUT_OFF = {
  idle: { error: "webhook body stalled" },
  slow: { error: "webhook body too slow" },
};

type Handler = (req: IncomingMessage, res: ServerResponse) => unknown;

export interface WebhookBodyLimits {
  /** One body's bytes. */
  body?: number;
  /** All bodies' bytes at once. */
  inFlight?: number;
  /** One client address's bytes at once. */
  perAddress?: number;
  /** Longest silence within a body, ms. */
  idleMs?: number;
  /** Longest time to receive a whole body, ms. */
  bodyMs?: number;
}

/**
 * Wraps the webhook middleware: 413 over the body cap, 503 (429 for one address) with Retry-After
 * while other deliveries hold the in-flight cap, 408 to a body that stalls or drags, else `next`
 * with the body read.
 */
export function capWebhookBody(
  path: string,
  next: Handler,
  limits: WebhookBodyLimits = {},
  clientAddressHeader?: string,
): Handler {
  const limit = limits.body ?? MAX_WEBHOOK_BYTES;
  const tooLarge = { error: `payload too large: a webhook body holds at most ${limit} bytes` };
  const inFlight = limits.inFlight ?? MAX_BYTES_IN_FLIGHT;
  const perAddress = limits.perAddress ?? MAX_BYTES_PER_ADDRESS;
  const read = { idleMs: limits.idleMs ?? IDLE_MS, bodyMs: limits.bodyMs ?? BODY_MS };
  let held = 0;
  const heldBy = new Map<string, number>();
  const capped: Handler = async (req, res) => {
    // An honest length over the cap is refused before a byte is read.
    if (Number(req.headers["content-length"] ?? 0) > limit) return refuse(res, 413, tooLarge);
    const address = clientAddress(req, clientAddressHeader);
    let reserved = 0;
    let busy = BUSY;
    const admit = (size: number) => {
      const more = size - reserved;
      const addressHeld = heldBy.get(address) ?? 0;
      if (held + more > inFlight) return false;
      if (addressHeld + more > perAddress) {
        busy = ADDRESS_BUSY;
        return false;
      }
      held += more;
      heldBy.set(address, addressHeld + more);
      reserved = size;
      return true;
    };
    try {
      const body = await readBody(req, limit, { admit, ...read });
      if (body === "too large") return refuse(res, 413, tooLarge);
      if (body === "idle" || body === "slow") return refuse(res, 408, CUT_OFF[body]);
      if (body === "refused") return refuse(res, busy.status, busy.body, RETRY);
      // Not parsed here: Probot checks the signature first, then answers malformed JSON with 400.
      Object.assign(req, { body: body.toString("utf8") });
      return await next(req, res);
    } finally {
      if (reserved > 0) {
        held -= reserved;
        const left = (heldBy.get(address) ?? 0) - reserved;
        if (left > 0) heldBy.set(address, left);
        else heldBy.delete(address);
      }
    }
  };
  // The delivery's span, the root of its job's trace; the intake adds what it made of it.
  const attributes = { "http.request.method": "POST", "http.route": path };
  return (req, res) => {
    if (req.method !== "POST" || new URL(req.url ?? "/", "http://x").pathname !== path) {
      return next(req, res);
    }
    return inSpan(`POST ${path}`, { kind: SpanKind.SERVER, attributes }, async (span) => {
      const handled = await capped(req, res);
      span.setAttribute("http.response.status_code", res.statusCode);
      return handled;
    });
  };
}
