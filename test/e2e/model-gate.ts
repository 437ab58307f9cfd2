// In front of the Anthropic fake: passes Messages API requests on, after a delay (a model that
// takes its time), or holds chosen ones unanswered (a model mid-reply when the worker dies).
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { setTimeout as delay } from "node:timers/promises";

export interface ModelGateOptions {
  /** Added before each answer. */
  delayMs?: number;
  /** Requests (0-based, in arrival order) left unanswered until the gate closes. */
  hold?: (index: number) => boolean;
}

export interface ModelGate {
  /** Base URL for the SDK. */
  url: string;
  /** Resolves with the index of the first held request once it has arrived. */
  held: Promise<number>;
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(["host", "connection", "content-length", "transfer-encoding"]);

export async function startModelGate(
  target: string,
  options: ModelGateOptions = {},
): Promise<ModelGate> {
  let count = 0;
  let arrived: (index: number) => void = () => {};
  const held = new Promise<number>((resolve) => {
    arrived = resolve;
  });
  const waiting = new Set<ServerResponse>();
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const index = count++;
    if (options.hold?.(index)) {
      waiting.add(res);
      arrived(index);
      return;
    }
    if (options.delayMs) await delay(options.delayMs);
    const headers = Object.entries(req.headers).flatMap(([name, value]) =>
      HOP_BY_HOP.has(name) || value === undefined
        ? []
        : [[name, String(value)] as [string, string]],
    );
    const upstream = await fetch(`${target}${req.url}`, {
      method: req.method,
      headers,
      body: Buffer.concat(chunks),
    });
    const back: Record<string, string> = {};
    upstream.headers.forEach((value, name) => {
      if (!HOP_BY_HOP.has(name) && name !== "content-encoding") back[name] = value;
    });
    res.writeHead(upstream.status, back);
    if (upstream.body) for await (const chunk of upstream.body) res.write(chunk);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    held,
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of waiting) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
