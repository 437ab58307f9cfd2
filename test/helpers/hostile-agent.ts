// A workspace agent that does not play fair: an HTTP server on a unix socket (whose kernel buffers
// are small, so what it sent is close to what the worker read) on the agent's routes
// (src/workspace/agent/protocol.ts) whose answers each test writes (one that never comes, one far
// over the cap), and which counts the bytes it got onto the wire: more than the worker can have read.
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export type Answer = (req: IncomingMessage, res: ServerResponse) => void;

export interface HostileAgent {
  socketPath: string;
  /** Resolves once a request for `path` (such as "/v1/read") has arrived, counting earlier ones. */
  arrived(path: string): Promise<void>;
  /** Resolves once every connection the worker opened is closed. */
  idle(): Promise<void>;
  /** Bytes written to all connections, headers included. */
  sent(): number;
  close(): Promise<void>;
}

/** Streams `bytes` of `fill` in 64 KiB writes, each after the last drained, until the peer goes. */
export function stream(res: ServerResponse, bytes: number, fill = "x"): void {
  const chunk = Buffer.alloc(64 * 1024, fill);
  let left = bytes;
  const more = () => {
    while (left > 0 && !res.destroyed) {
      const next = chunk.subarray(0, Math.min(left, chunk.length));
      left -= next.length;
      if (!res.write(next)) return void res.once("drain", more);
    }
    if (!res.destroyed) res.end();
  };
  more();
}

export async function startHostileAgent(answer: Answer): Promise<HostileAgent> {
  const paths: string[] = [];
  const waiting: Array<{ path: string; resolve(): void }> = [];
  const open = new Set<Socket>();
  const idle: Array<() => void> = [];
  let sent = 0;
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://agent.invalid").pathname;
    paths.push(path);
    for (const waiter of waiting.filter((w) => w.path === path)) {
      waiting.splice(waiting.indexOf(waiter), 1);
      waiter.resolve();
    }
    req.resume();
    answer(req, res);
  });
  server.on("connection", (socket) => {
    open.add(socket);
    socket.on("close", () => {
      sent += socket.bytesWritten;
      open.delete(socket);
      if (open.size === 0) for (const resolve of idle.splice(0)) resolve();
    });
  });
  const dir = await mkdtemp(join(tmpdir(), "vmpilot-hostile-agent-"));
  const socketPath = join(dir, "agent.sock");
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return {
    socketPath,
    arrived: (path) =>
      paths.includes(path)
        ? Promise.resolve()
        : new Promise((resolve) => waiting.push({ path, resolve })),
    idle: () =>
      open.size === 0 ? Promise.resolve() : new Promise((resolve) => idle.push(resolve)),
    sent: () => sent + [...open].reduce((total, socket) => total + socket.bytesWritten, 0),
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
