// What the Fly Machines and Kubernetes API fakes share: a loopback HTTP server that checks the
// bearer token, answers injected failures first, records each call as "METHOD /path", and starts a
// real workspace agent (fake-vm.ts) for each VM it is asked for.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type FakeVm, type FakeVms, startFakeVms } from "./fake-vm.ts";

export interface Failure {
  /** "POST", "GET", "DELETE"; the next such call fails. */
  method: string;
  status: number;
}

export interface EngineFake {
  url: string;
  port: number;
  token: string;
  image: string;
  /** Calls made, as "METHOD /path" without the query (Kubernetes: a watch as "WATCH /path"). */
  calls: string[];
  /** Requests the fake could not match: a test that sees any has a bug. */
  problems: string[];
  vms: FakeVms;
  failNext(failure: Failure): void;
  close(): Promise<void>;
}

/** The status and JSON body to answer with, or "answered" when the handler wrote (streams) `res`. */
export type Handler = (
  req: IncomingMessage,
  url: URL,
  body: unknown,
  res: ServerResponse,
) => Promise<[number, unknown] | "answered">;

export interface EngineFakeParts {
  /** The body of an error answer, in the engine's own shape. */
  errorBody(status: number, message: string): unknown;
  handle(vms: FakeVms, problems: string[]): Handler;
  /** The verb a call is recorded with; default its HTTP method. */
  verb?(req: IncomingMessage, url: URL): string;
}

export const TOKEN = "fake-engine-token-0123456789";
export const IMAGE = "registry.example/vmpilot-workspace:1";

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

export async function startEngineFake(parts: EngineFakeParts): Promise<EngineFake> {
  const vms = await startFakeVms();
  const calls: string[] = [];
  const problems: string[] = [];
  const failures: Failure[] = [];
  const handle = parts.handle(vms, problems);
  const send = (res: ServerResponse, status: number, value: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(value));
  };
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://fake.invalid");
    calls.push(`${parts.verb?.(req, url) ?? req.method} ${url.pathname}`);
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      send(res, 401, parts.errorBody(401, "unauthorized"));
      return;
    }
    const failure = failures.findIndex((f) => f.method === req.method);
    if (failure >= 0) {
      const [injected] = failures.splice(failure, 1);
      const status = injected?.status ?? 500;
      send(res, status, parts.errorBody(status, `injected ${status}`));
      return;
    }
    try {
      const answer = await handle(req, url, await readJson(req), res);
      if (answer !== "answered") send(res, ...answer);
    } catch (error) {
      problems.push(`${req.method} ${url.pathname}: ${(error as Error).message}`);
      send(res, 500, parts.errorBody(500, (error as Error).message));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    token: TOKEN,
    image: IMAGE,
    calls,
    problems,
    vms,
    failNext: (failure) => failures.push(failure),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await vms.close();
    },
  };
}

export type { FakeVm };
