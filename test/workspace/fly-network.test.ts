// Fly network isolation against the loopback Fly fake (nothing here reaches Fly): a workspace
// Machine declares the agent's service, and the worker reaches the agent only through the
// workspace app's Flycast address, every request naming its Machine; a Machine the worker reaches
// at its own address is refused; the VM's proxy is the worker's Flycast address, whichever
// worker the Fly Proxy lands a connection on; half an isolation is a configuration error.
import { execFile, execFileSync } from "node:child_process";
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createWorkspace } from "../../src/workspace/factory.ts";
import { SandboxUnavailableError } from "../../src/workspace/sandbox/bwrap.ts";
import { VmRefused } from "../../src/workspace/vm/engine.ts";
import { createEgressGateway } from "../../src/workspace/vm/gateway.ts";
import { createVmWorkspace } from "../../src/workspace/vm/open.ts";
import { egressFor, engineFor, startFlyNetwork } from "../../src/workspace/vm/settings.ts";
import { type FlyFake, flyEngine, startFlyFake } from "../helpers/fly-fake.ts";
import { commitFile, recordingLogger } from "./helpers.ts";

let base: string;
let local: string;
let fake: FlyFake;

beforeAll(async () => {
  base = await realpath(await mkdtemp(join(tmpdir(), "vmpilot-fly-network-")));
  local = join(base, "checkout");
  await mkdir(local);
  execFileSync("git", ["init", "-q", "-b", "vmpilot/issue-12", local]);
  execFileSync("git", ["-C", local, "remote", "add", "origin", "https://github.com/o/r.git"]);
  commitFile(local, "README.md", "hello\n");
  fake = await startFlyFake({ flycast: true, isolated: true });
});

afterAll(async () => {
  await fake.close();
  await rm(base, { recursive: true, force: true });
});

/** The engine with isolation; the fake's Machines are on a network the worker does not reach. */
const isolatedEngine = (on: FlyFake) =>
  flyEngine(on, { flycast: on.flycast?.address, reachable: async () => false });

describe("isolated fly workspaces", () => {
  it("reach each agent only through the Flycast address, every request naming its Machine", async () => {
    const flycast = fake.flycast;
    if (!flycast) throw new Error("the fake has no Flycast address");
    const workspace = await createWorkspace({
      isolation: "vm",
      engine: "fly",
      root: local,
      vmEngine: isolatedEngine(fake),
      owner: "job-1-1",
    });
    const [machine] = fake.machines.values();
    if (!machine) throw new Error("no Machine was made");
    expect(machine.config.services).toEqual([
      {
        protocol: "tcp",
        internal_port: fake.vms.port,
        autostart: false,
        autostop: "off",
        ports: [{ port: fake.vms.port, handlers: ["http"] }],
      },
    ]);
    expect((await workspace.exec("cat README.md")).stdout).toBe("hello\n");
    await workspace.dispose();
    expect(fake.vms.running()).toBe(0);
    expect(flycast.unrouted).toEqual([]);
    expect(flycast.routed).toEqual(
      expect.arrayContaining([
        `GET /health -> ${machine.id}`,
        `POST /v1/checkout -> ${machine.id}`,
        `POST /v1/exec -> ${machine.id}`,
      ]),
    );
    expect(flycast.routed.every((line) => line.endsWith(` -> ${machine.id}`))).toBe(true);
  });

  it("refuses a Machine the worker reaches at its own address, and leaves none behind", async () => {
    // The app was made without a network of its own: its Machines answer on the worker's.
    const shared = await startFlyFake({ flycast: true });
    onTestFinished(() => shared.close());
    const engine = flyEngine(shared, { flycast: shared.flycast?.address });
    const made = engine.create({ owner: "job-2-1", secret: "s".repeat(40) });
    await expect(made).rejects.toBeInstanceOf(VmRefused);
    await expect(made).rejects.toThrow(/network of its own/);
    expect(shared.vms.running()).toBe(0);
    expect(await engine.list()).toEqual([]);
  });

  it("gives the VM the worker's Flycast address as its proxy, routed by any worker's gateway", async () => {
    const site = createServer((_req, res) => res.end("allowed page"));
    await new Promise<void>((resolve) => site.listen(0, "127.0.0.2", resolve));
    const sitePort = (site.address() as AddressInfo).port;
    onTestFinished(() => new Promise<void>((resolve) => site.close(() => resolve())));
    // Two workers' gateways, each at the address that stands for the worker app's Flycast one.
    const ports: Record<string, number> = {};
    const hosts: Record<string, string> = { workera: "127.1.0.2", workerb: "127.1.0.3" };
    const locate = (owner: string) => ({ host: hosts[owner] ?? "", port: ports[owner] ?? 0 });
    const gateway = (owner: string) =>
      createEgressGateway({
        host: hosts[owner] ?? "",
        listenHost: hosts[owner],
        port: 0,
        owner,
        locate,
      });
    const a = gateway("workera");
    const b = gateway("workerb");
    onTestFinished(async () => {
      await Promise.all([a.close(), b.close()]);
    });
    ports.workera = await a.listen();
    ports.workerb = await b.listen();

    const workspace = await createVmWorkspace({
      engine: isolatedEngine(fake),
      localRoot: local,
      owner: "job-3-1",
      egress: {
        host: "127.0.0.1",
        gateway: a,
        allowHosts: [`127.0.0.2:${sitePort}`],
        allowPrivate: ["127.0.0.2"],
        logger: recordingLogger(),
      },
    });
    const proxy = (await workspace.exec("printenv HTTPS_PROXY")).stdout.trim();
    expect(proxy).toMatch(
      new RegExp(`^http://vmpilot:workera\\.[\\w-]+@127\\.1\\.0\\.2:${ports.workera}$`),
    );
    // The test stands in for the VM, whose network reaches only the Flycast address.
    const curl = (...args: string[]) =>
      new Promise<string>((resolve) => {
        execFile("curl", ["-s", "-w", " %{http_code}", ...args], (_e, out) => resolve(out));
      });
    const page = `http://127.0.0.2:${sitePort}/`;
    expect(await curl("-x", proxy, page)).toBe("allowed page 200");
    expect(await curl("-p", "-x", proxy, page)).toBe("allowed page 200");
    expect(await curl("-x", proxy, "http://example.com/")).toMatch(/ 403$/);
    expect(await curl("-x", proxy.replace(/vmpilot:[^@]+@/, ""), page)).toMatch(/ 407$/);
    // The Fly Proxy lands the VM's connection on the other worker, which sends it on.
    const viaB = proxy.replace(`127.1.0.2:${ports.workera}`, `127.1.0.3:${ports.workerb}`);
    expect(await curl("-x", viaB, page)).toBe("allowed page 200");
    expect(await curl("-p", "-x", viaB, page)).toBe("allowed page 200");
    expect(workspace.blockedConnections().map((blocked) => blocked.host)).toEqual(["example.com"]);
    await workspace.dispose();
    // The gateway stays for other VMs; this VM's password leads nowhere now.
    expect(await curl("-x", proxy, page)).toMatch(/ 407$/);
    expect(await curl("-x", viaB, page)).toMatch(/ 407$/);
  });
});

describe("fly network settings", () => {
  const env = {
    FLY_API_TOKEN: "t",
    FLY_WORKSPACE_APP: "vmpilot-workspaces",
    FLY_WORKSPACE_IMAGE: "i",
    FLY_MACHINE_ID: "148e271b6d4e89",
    FLY_APP_NAME: "vmpilot",
  };
  const isolated = {
    ...env,
    FLY_WORKSPACE_FLYCAST: "vmpilot-workspaces.flycast",
    FLY_WORKER_FLYCAST: "fdaa:0:ffff:0:1::2",
  };

  it("refuses half an isolation, and a proxy address an isolated VM cannot reach", () => {
    const refused = (overrides: Record<string, string | undefined>) => () =>
      engineFor("fly", { ...isolated, ...overrides });
    expect(refused({ FLY_WORKER_FLYCAST: undefined })).toThrow(SandboxUnavailableError);
    expect(refused({ FLY_WORKER_FLYCAST: "" })).toThrow(
      /FLY_WORKER_FLYCAST \(isolation needs both/,
    );
    expect(refused({ FLY_WORKSPACE_FLYCAST: "" })).toThrow(/FLY_WORKSPACE_FLYCAST \(isolation/);
    expect(refused({ WORKSPACE_PROXY_HOST: "fdaa::5" })).toThrow(
      /WORKSPACE_PROXY_HOST \(an isolated/,
    );
    expect(refused({ FLY_MACHINE_ID: "" })).toThrow(/on a Fly Machine/);
    expect(refused({ FLY_WORKER_FLYCAST: "not an address!" })).toThrow(/FLY_WORKER_FLYCAST/);
    expect(() => engineFor("fly", isolated)).not.toThrow();
    expect(egressFor("fly", { FLY_PRIVATE_IP: "fdaa::7" })).toEqual({ host: "fdaa::7" });
    const route = egressFor("fly", isolated);
    expect(route?.host).toBe("127.0.0.1");
    expect(route?.gateway?.password()).toMatch(/^148e271b6d4e89\.[\w-]{32}$/);
  });

  it("warns once at a worker's start that workspaces without isolation share the 6PN", async () => {
    const logger = recordingLogger();
    await startFlyNetwork(logger, env);
    expect(logger.lines).toHaveLength(1);
    expect(logger.lines[0]?.level).toBe("warn");
    expect(String(logger.lines[0]?.args[0])).toMatch(
      /share the organization's private network \(6PN\)/,
    );
  });
});
