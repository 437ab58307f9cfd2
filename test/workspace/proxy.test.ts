import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import { type AddressInfo, connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { compileAddressPolicy, parseAddressRange } from "../../src/config/address-policy.ts";
import { compileAllowList, startAllowListProxy } from "../../src/workspace/sandbox/proxy.ts";
import { recordingLogger } from "./helpers.ts";

describe("compileAllowList", () => {
  const allowed = compileAllowList([
    "registry.npmjs.org",
    "github.com:443",
    "*.pythonhosted.org",
    "127.0.0.2:8080",
    "[::1]:9000",
  ]);

  it.each([
    ["registry.npmjs.org", 443],
    ["REGISTRY.npmjs.org.", 80],
    ["github.com", 443],
    ["files.pythonhosted.org", 443],
    ["127.0.0.2", 8080],
    ["::1", 9000],
  ])("allows %s:%i", (host, port) => {
    expect(allowed(host, port)).toBe(true);
  });

  it.each([
    ["github.com", 22],
    ["api.github.com", 443],
    ["pythonhosted.org", 443],
    ["evilpythonhosted.org", 443],
    ["registry.npmjs.org.evil.com", 443],
    ["127.0.0.2", 8081],
  ])("refuses %s:%i", (host, port) => {
    expect(allowed(host, port)).toBe(false);
  });

  it.each(["http://x.com", "a b", "x.com:0", "x.com:99999", "*"])(
    "rejects the entry %j",
    (entry) => {
      expect(() => compileAllowList([entry])).toThrow(/Invalid network allow-list entry/);
    },
  );
});

describe("startAllowListProxy addresses", () => {
  let dir: string;
  let server: http.Server;
  let port: number;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "vmpilot-proxy-test-"));
    server = http.createServer((_req, res) => res.end("worker loopback"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  async function proxyFor(allowHosts: string[], allowPrivate: string[] = []) {
    const socketPath = join(dir, `${randomUUID()}.sock`);
    const proxy = await startAllowListProxy({
      listen: { socketPath },
      allowHosts,
      allowPrivate,
      logger: recordingLogger(),
    });
    onTestFinished(() => proxy.close());
    return { proxy, socketPath };
  }

  /** The proxy's status line for a CONNECT tunnel to `target`. */
  async function tunnel(socketPath: string, target: string): Promise<string> {
    const socket = connect(socketPath);
    onTestFinished(() => {
      socket.destroy();
    });
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
    const [data] = (await once(socket, "data")) as [Buffer];
    return data.toString().split("\r\n")[0] ?? "";
  }

  /** Status and body of a plain HTTP request forwarded to `url`. */
  async function forward(socketPath: string, url: string): Promise<[number, string]> {
    const response = await new Promise<http.IncomingMessage>((resolve, reject) =>
      http.get({ socketPath, path: url }, resolve).on("error", reject),
    );
    let body = "";
    for await (const chunk of response) body += chunk;
    return [response.statusCode ?? 0, body];
  }

  it.each([
    ["127.0.0.1", "127.0.0.1", "loopback"],
    ["localhost", "localhost", "loopback"],
  ])("refuses the worker's loopback allowed as %s, and records why", async (entry, host, why) => {
    const { proxy, socketPath } = await proxyFor([entry]);
    expect(await tunnel(socketPath, `${host}:${port}`)).toBe("HTTP/1.1 403 Forbidden");
    const [status, body] = await forward(socketPath, `http://${host}:${port}/`);
    expect(status).toBe(403);
    expect(body).not.toContain("worker loopback");
    expect(proxy.blocked()).toEqual([
      {
        host: entry,
        port,
        reason: expect.stringContaining(`(${why})`),
        at: expect.any(Date),
      },
      {
        host: entry,
        port,
        reason: expect.stringContaining(`(${why})`),
        at: expect.any(Date),
      },
    ]);
  });

  it.each([
    ["::ffff:127.0.0.1", "loopback"],
    ["169.254.169.254", "link-local"],
    ["10.1.2.3", "private"],
    ["100.64.0.1", "private"],
    ["0.0.0.0", "unspecified"],
    ["255.255.255.255", "reserved"],
  ])("refuses %s (%s) without connecting", async (address, why) => {
    const { proxy, socketPath } = await proxyFor([address]);
    const target = address.includes(":") ? `[${address}]:80` : `${address}:80`;
    expect(await tunnel(socketPath, target)).toBe("HTTP/1.1 403 Forbidden");
    expect(proxy.blocked()).toEqual([
      {
        host: address,
        port: 80,
        reason: `${address} resolves to ${address} (${why})`,
        at: expect.any(Date),
      },
    ]);
  });

  it("reaches a range the operator opened", async () => {
    const { proxy, socketPath } = await proxyFor(["localhost"], ["127.0.0.0/8", "::1"]);
    expect(await tunnel(socketPath, `localhost:${port}`)).toBe(
      "HTTP/1.1 200 Connection Established",
    );
    expect(await forward(socketPath, `http://localhost:${port}/`)).toEqual([
      200,
      "worker loopback",
    ]);
    expect(proxy.blocked()).toEqual([]);
  });

  it("over TCP, for a VM: answers only requests with the workspace's credentials", async () => {
    const proxy = await startAllowListProxy({
      listen: { host: "127.0.0.1", port: 0 },
      password: "vm-secret-0123456789",
      allowHosts: [`localhost:${port}`],
      allowPrivate: ["127.0.0.0/8", "::1"],
      logger: recordingLogger(),
    });
    onTestFinished(() => proxy.close());
    const basic = (user: string, password: string) =>
      `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;
    const ask = async (authorization: string | undefined, target = `localhost:${port}`) => {
      const socket = connect(proxy.port ?? 0, "127.0.0.1");
      onTestFinished(() => {
        socket.destroy();
      });
      const auth = authorization ? `Proxy-Authorization: ${authorization}\r\n` : "";
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
      const [data] = (await once(socket, "data")) as [Buffer];
      return data.toString().split("\r\n")[0] ?? "";
    };
    const required = "HTTP/1.1 407 Proxy Authentication Required";
    expect(await ask(undefined)).toBe(required);
    expect(await ask(basic("vmpilot", "another-job-secret"))).toBe(required);
    expect(await ask(basic("vmpilot", "vm-secret-0123456789"))).toBe(
      "HTTP/1.1 200 Connection Established",
    );
    expect(await ask(basic("vmpilot", "vm-secret-0123456789"), "example.com:443")).toBe(
      "HTTP/1.1 403 Forbidden",
    );
    const plain = await new Promise<http.IncomingMessage>((resolve, reject) =>
      http
        .get({ host: "127.0.0.1", port: proxy.port, path: `http://localhost:${port}/` }, resolve)
        .on("error", reject),
    );
    plain.resume();
    expect(plain.statusCode).toBe(407);
    expect(proxy.blocked().map((b) => b.host)).toEqual(["example.com"]);
  });
});

describe("compileAddressPolicy", () => {
  const refused = compileAddressPolicy(["10.1.0.0/16", "fd00::/8"]);

  it.each([
    ["127.0.0.1", "loopback"],
    ["::1", "loopback"],
    ["::ffff:7f00:1", "loopback"],
    ["::ffff:169.254.169.254", "link-local"],
    ["fe80::1", "link-local"],
    ["10.2.0.1", "private"],
    ["172.16.0.1", "private"],
    ["192.168.1.1", "private"],
    ["fc00::1", "private"],
    ["::", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["ff02::1", "multicast"],
    // IPv4 addresses inside NAT64 and 6to4 forms are checked as IPv4.
    ["64:ff9b::7f00:1", "loopback (NAT64)"],
    ["64:ff9b::169.254.169.254", "link-local (NAT64)"],
    ["2002:a02:1::1", "private (6to4)"],
    ["64:ff9b:1::a00:1", "reserved"],
  ])("refuses %s (%s)", (address, why) => {
    expect(refused(address)).toBe(why);
  });

  it.each([
    "140.82.112.3",
    "2606:4700::1111",
    "10.1.200.7",
    "fd12::1",
    "::ffff:10.1.0.1",
    "64:ff9b::8c52:7003",
    "2002:a01:c807::1",
  ])("lets %s through", (address) => {
    expect(refused(address)).toBeUndefined();
  });

  it.each(["10.0.0.0/33", "10.0.0.0/x", "example.com", "10.0.0.0/8/8", ""])(
    "rejects the range %j",
    (range) => {
      expect(parseAddressRange(range)).toBeUndefined();
    },
  );
});
