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

/**
 * Resolves to the body, or undefined once it passed `limit` bytes or `admit` refused the size read
 * so far (the request is then abandoned).
 */
export function readCapped(
  req: IncomingMessage,
  limit: number,
  admit: (size: number) => boolean = () => true,
): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit || !admit(size)) {
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
