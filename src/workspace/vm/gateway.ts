// The one port VMs on an isolated Fly network reach the worker's egress proxies at (fly-network.ts).
// The Fly Proxy forwards only a port the worker app declares, and lands each connection on any of
// the app's worker Machines. So every worker listens on that port, reads the first request's
// Proxy-Authorization, and hands the connection on: to this worker's proxy for that VM, on
// loopback, or, when the password names another worker, to that worker's gateway over the
// organization's network. Nothing is decided here: the VM's own proxy checks the password.
import { randomBytes } from "node:crypto";
import net from "node:net";

export interface EgressGateway {
  /** A new proxy password, naming this worker so that another worker's gateway sends it here. */
  password(): string;
  /** Starts listening, once; resolves to the port. A worker starts it before its first VM. */
  listen(): Promise<number>;
  /**
   * Sends connections carrying `password` to the proxy on this machine's loopback `port` until
   * `remove` runs; `host` and `port` are where the VM dials. Starts the gateway on first use.
   */
  add(password: string, port: number): Promise<{ host: string; port: number; remove(): void }>;
  close(): Promise<void>;
}

export interface GatewayOptions {
  /** Where VMs dial it: the worker app's Flycast address in the workspace network. */
  host: string;
  /** The port it listens on and VMs dial; 0 (tests): any. */
  port: number;
  /** Default "::": Flycast connections and other workers' both arrive. */
  listenHost?: string;
  /** This worker's name in passwords (its FLY_MACHINE_ID). */
  owner: string;
  /** Where another worker's gateway listens. */
  locate(owner: string): { host: string; port: number };
}

const OWNER = /^[a-z0-9]{1,32}$/;
/** A request head longer than this is no proxy request of ours. */
const MAX_HEAD = 16 * 1024;
const HEAD_MS = 30_000;
const AUTH_REQUIRED =
  'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="vmpilot"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n';
const BAD_GATEWAY = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/** The password of the head's `Proxy-Authorization: Basic …`, if any. */
function passwordOf(head: string): string | undefined {
  const header = /^proxy-authorization:[ \t]*basic[ \t]+([A-Za-z0-9+/=]+)[ \t]*\r?$/im.exec(head);
  if (!header?.[1]) return undefined;
  const decoded = Buffer.from(header[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  return colon === -1 ? undefined : decoded.slice(colon + 1);
}

export function createEgressGateway(options: GatewayOptions): EgressGateway {
  if (!OWNER.test(options.owner)) throw new Error(`not a Fly Machine id: ${options.owner}`);
  const routes = new Map<string, number>();
  const sockets = new Set<net.Socket>();
  let listening: Promise<number> | undefined;

  const server = net.createServer((client) => {
    track(client);
    client.on("error", () => client.destroy());
    client.setTimeout(HEAD_MS, () => client.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      if (head.indexOf("\r\n\r\n") === -1) {
        if (head.length > MAX_HEAD) client.destroy();
        return;
      }
      client.off("data", onData);
      client.pause();
      client.setTimeout(0);
      forward(client, head);
    };
    client.on("data", onData);
  });

  function track(socket: net.Socket) {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  }

  function forward(client: net.Socket, head: Buffer) {
    const password = passwordOf(head.toString("latin1"));
    const local = password === undefined ? undefined : routes.get(password);
    const owner = password?.split(".")[0] ?? "";
    const target =
      local !== undefined
        ? { host: "127.0.0.1", port: local }
        : owner !== options.owner && OWNER.test(owner)
          ? options.locate(owner)
          : undefined;
    if (!target) {
      client.end(AUTH_REQUIRED);
      return;
    }
    const upstream = net.connect(target);
    track(upstream);
    let connected = false;
    upstream.on("error", () => (connected ? client.destroy() : client.end(BAD_GATEWAY)));
    client.on("close", () => upstream.destroy());
    upstream.on("connect", () => {
      connected = true;
      upstream.write(head);
      client.pipe(upstream).pipe(client);
      client.resume();
    });
  }

  const listen = () => {
    listening ??= new Promise<number>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port, options.listenHost ?? "::", () => {
        server.off("error", reject);
        resolve((server.address() as net.AddressInfo).port);
      });
    }).catch((error: Error) => {
      listening = undefined;
      throw new Error(`the egress gateway cannot listen on port ${options.port}: ${error.message}`);
    });
    return listening;
  };
  // Idle, it keeps no process alive.
  server.unref();

  return {
    password: () => `${options.owner}.${randomBytes(24).toString("base64url")}`,
    listen,
    async add(password, port) {
      const listened = await listen();
      routes.set(password, port);
      return { host: options.host, port: listened, remove: () => routes.delete(password) };
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      if (!listening) return;
      listening = undefined;
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
