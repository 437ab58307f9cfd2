// Request bodies read with a cap, so a forged POST is never buffered whole in memory.
import type { IncomingMessage, ServerResponse } from "node:http";

/** How long a refused connection stays half-open for its client to read the answer. */
const LINGER_MS = 1000;

/** Answers with JSON and closes the connection without reading the rest of the body. */
export function refuse(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): true {
  // The rest of an oversize body is never read: the connection is closed instead of drained.
  // Closing a socket with unread input resets it, and the reset may reach the client before it
  // has read the answer; so the server half-closes first and cuts the connection a moment later.
  res.writeHead(status, { "content-type": "application/json", ...headers });
  // The socket is detached from `res` once the response finished; hold on to it.
  const socket = res.socket;
  res.end(JSON.stringify(body), () => {
    socket?.end();
    setTimeout(() => socket?.destroy(), LINGER_MS).unref();
  });
  return true;
}

/** Why a body was not read whole. */
export type Unread = "too large" | "refused" | "idle" | "slow";

export interface ReadOptions {
  /** Told the bytes read so far at each chunk; false abandons the request. */
  admit?(size: number): boolean;
  /**
   * Abandons a request that sent nothing for this long (checked every idleMs, so after one to two
   * of them), or whose body is not whole after `bodyMs` (rounded up to a whole idleMs).
   */
  idleMs?: number;
  bodyMs?: number;
}

/** Resolves to the body, or to why it was abandoned (the request is then read no further). */
export function readBody(
  req: IncomingMessage,
  limit: number,
  options: ReadOptions = {},
): Promise<Buffer | Unread> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = (why: Unread) => {
      clearTimeout(timer);
      req.off("data", onData);
      req.pause();
      resolve(why);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return stop("too large");
      if (options.admit && !options.admit(size)) return stop("refused");
      chunks.push(chunk);
    };
    // One timer per body, not one per chunk: each tick compares the size with the last tick's.
    const { idleMs, bodyMs = Number.POSITIVE_INFINITY } = options;
    let seen = 0;
    let waited = 0;
    const timer =
      idleMs === undefined
        ? undefined
        : setTimeout(() => {
            waited += idleMs;
            if (size === seen) return stop("idle");
            if (waited >= bodyMs) return stop("slow");
            seen = size;
            timer?.refresh();
          }, idleMs);
    req.on("data", onData);
    req.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.on("end", () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
  });
}

/**
 * Resolves to the body, or undefined once it passed `limit` bytes or `admit` refused the size read
 * so far (the request is then abandoned).
 */
export async function readCapped(
  req: IncomingMessage,
  limit: number,
  admit?: (size: number) => boolean,
): Promise<Buffer | undefined> {
  const read = await readBody(req, limit, { admit });
  return Buffer.isBuffer(read) ? read : undefined;
}
