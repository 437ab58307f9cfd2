import { createHash, timingSafeEqual } from "node:crypto";
import { lookup } from "node:dns/promises";
import http from "node:http";
import net from "node:net";
import type { Duplex } from "node:stream";
import { compileAddressPolicy } from "../../config/address-policy.ts";
import type { Logger } from "../../log/logger.ts";
import type { BlockedConnection } from "../types.ts";

/** Enough to report what a run tried to reach, without letting a loop grow memory forever. */
const MAX_RECORDED = 1000;

const FORBIDDEN = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const AUTH_REQUIRED =
  'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="vmpilot"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n';
const BAD_GATEWAY = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

const HOST_PATTERN = /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

interface Rule {
  host: string;
  wildcard: boolean;
  port?: number;
}

function splitHostPort(value: string): { host: string; port?: number } {
  const v6 = /^\[([0-9a-f:.]+)\](?::(\d+))?$/i.exec(value);
  if (v6?.[1]) return { host: v6[1], port: v6[2] ? Number(v6[2]) : undefined };
  const colon = value.lastIndexOf(":");
  if (colon === -1 || value.indexOf(":") !== colon) return { host: value };
  return { host: value.slice(0, colon), port: Number(value.slice(colon + 1)) };
}

function normalizeHost(host: string): string {
  return host.toLowerCase().replace(/\.$/, "");
}

/**
 * Compiles allow-list entries: `host` (any port), `host:port`, `*.domain` (subdomains only),
 * `[v6addr]:port`. Invalid entries throw, so a typo cannot silently open or close access.
 */
export function compileAllowList(
  entries: readonly string[],
): (host: string, port: number) => boolean {
  const rules: Rule[] = entries.map((entry) => {
    const { host: raw, port } = splitHostPort(entry.trim());
    const host = normalizeHost(raw);
    const validPort = port === undefined || (Number.isInteger(port) && port > 0 && port < 65536);
    if (!validPort || !(HOST_PATTERN.test(host) || net.isIP(host))) {
      throw new Error(`Invalid network allow-list entry ${JSON.stringify(entry)}`);
    }
    const wildcard = host.startsWith("*.");
    return { host: wildcard ? host.slice(1) : host, wildcard, port };
  });
  return (rawHost, port) => {
    const host = normalizeHost(rawHost);
    return rules.some(
      (r) =>
        (r.port === undefined || r.port === port) &&
        (r.wildcard ? host.endsWith(r.host) && host.length > r.host.length : host === r.host),
    );
  };
}

export interface AllowListProxy {
  /** With `tcp`: the port it listens on. */
  port: number | undefined;
  blocked(): readonly BlockedConnection[];
  close(): Promise<void>;
}

export interface ProxyOptions {
  /** Where it listens: a unix socket the sandbox reaches through a bind mount, or a TCP address
   * a VM reaches over the private network (then with `password`). */
  listen: { socketPath: string } | { host: string; port: number };
  /** Every request must carry `Proxy-Authorization: Basic vmpilot:<password>`; 407 otherwise. */
  password?: string;
  allowHosts: readonly string[];
  /** Loopback/private/link-local ranges the operator opened (NETWORK_ALLOW_PRIVATE). */
  allowPrivate?: readonly string[];
  logger: Logger;
}

type Resolved = { address: string } | { refused: string } | { error: string };

/**
 * An HTTP proxy (CONNECT tunnels and plain forwarding) that only reaches allow-listed hosts and
 * records every refusal. It runs in the worker, outside the sandbox's empty network namespace,
 * so it resolves each name once, refuses it when any address is the worker's own network
 * (loopback, private, link-local...), and connects to the address it checked, never to the name
 * again: a rebinding name cannot slip a loopback address in between.
 */
export async function startAllowListProxy(options: ProxyOptions): Promise<AllowListProxy> {
  const allowed = compileAllowList(options.allowHosts);
  const addressRefused = compileAddressPolicy(options.allowPrivate);
  const blocked: BlockedConnection[] = [];
  const sockets = new Set<Duplex>();

  const refuse = (host: string, port: number, reason?: string): void => {
    if (blocked.length < MAX_RECORDED) {
      blocked.push(
        reason ? { host, port, reason, at: new Date() } : { host, port, at: new Date() },
      );
    }
    options.logger.info({ host, port, reason }, "sandbox network request blocked");
  };

  const resolve = async (host: string): Promise<Resolved> => {
    let addresses: { address: string }[];
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch (error) {
      return { error: `cannot resolve ${host}: ${(error as Error).message}` };
    }
    for (const { address } of addresses) {
      const why = addressRefused(address);
      if (why) return { refused: `${host} resolves to ${address} (${why})` };
    }
    const first = addresses[0];
    return first ? first : { error: `cannot resolve ${host}` };
  };

  const expected = options.password
    ? createHash("sha256")
        .update(`Basic ${Buffer.from(`vmpilot:${options.password}`).toString("base64")}`)
        .digest()
    : undefined;
  /** False when a password is set and the request does not carry it. */
  const authorized = (req: http.IncomingMessage): boolean => {
    if (!expected) return true;
    const sent = createHash("sha256")
      .update(req.headers["proxy-authorization"] ?? "")
      .digest();
    if (timingSafeEqual(sent, expected)) return true;
    options.logger.warn({}, "refused a proxy request without the workspace's credentials");
    return false;
  };

  const server = http.createServer(async (req, res) => {
    if (!authorized(req)) {
      res.writeHead(407, { "proxy-authenticate": 'Basic realm="vmpilot"', connection: "close" });
      res.end();
      return;
    }
    let target: URL;
    try {
      target = new URL(req.url ?? "");
    } catch {
      res.writeHead(400).end("vmpilot proxy: expected an absolute URL\n");
      return;
    }
    const port = Number(target.port) || 80;
    const host = target.hostname.replace(/^\[|\]$/g, "");
    if (target.protocol !== "http:" || !allowed(host, port)) {
      refuse(host, port);
      res.writeHead(403).end(`vmpilot sandbox: network access to ${host}:${port} is not allowed\n`);
      return;
    }
    const resolved = await resolve(host);
    if ("refused" in resolved) {
      refuse(host, port, resolved.refused);
      res.writeHead(403).end(`vmpilot sandbox: ${resolved.refused}, which is not allowed\n`);
      return;
    }
    if ("error" in resolved) {
      res.writeHead(502).end(`vmpilot proxy: ${resolved.error}\n`);
      return;
    }
    const headers = { ...req.headers };
    delete headers["proxy-connection"];
    delete headers["proxy-authorization"];
    const upstream = http.request(
      {
        host: resolved.address,
        port,
        method: req.method,
        path: target.pathname + target.search,
        headers,
        agent: false,
      },
      (response) => {
        res.writeHead(response.statusCode ?? 502, response.headers);
        response.pipe(res);
      },
    );
    upstream.on("error", (error) => {
      if (!res.headersSent) res.writeHead(502);
      res.end(`vmpilot proxy: ${error.message}\n`);
    });
    req.pipe(upstream);
  });

  server.on("connect", async (req: http.IncomingMessage, client: Duplex, head: Buffer) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    if (!authorized(req)) {
      client.end(AUTH_REQUIRED);
      return;
    }
    const { host: rawHost, port = 443 } = splitHostPort(req.url ?? "");
    const host = normalizeHost(rawHost);
    if (!Number.isInteger(port) || !allowed(host, port)) {
      refuse(host, port);
      client.end(FORBIDDEN);
      return;
    }
    const resolved = await resolve(host);
    if ("refused" in resolved) refuse(host, port, resolved.refused);
    if (client.destroyed) return;
    if (!("address" in resolved)) {
      client.end("refused" in resolved ? FORBIDDEN : BAD_GATEWAY);
      return;
    }
    let connected = false;
    const upstream = net.connect({ host: resolved.address, port }, () => {
      connected = true;
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on("close", () => {
      sockets.delete(upstream);
      if (connected) client.destroy();
    });
    upstream.on("error", () => {
      if (connected) client.destroy();
      else client.end(BAD_GATEWAY);
    });
  });

  server.on("connection", (socket: net.Socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    const done = () => {
      server.off("error", reject);
      resolve();
    };
    if ("socketPath" in options.listen) server.listen(options.listen.socketPath, done);
    else server.listen(options.listen.port, options.listen.host, done);
  });

  const address = server.address();
  return {
    port: typeof address === "object" && address ? address.port : undefined,
    blocked: () => blocked,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
