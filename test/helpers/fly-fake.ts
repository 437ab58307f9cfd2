// A loopback Fly Machines API (https://fly.io/docs/machines/api/): create, wait, get, list and
// destroy Machines of one app, with Fly's shapes ({"error": "..."} bodies, private_ip on the
// private network, metadata in config). Each Machine runs the real workspace agent.
import { randomBytes } from "node:crypto";
import { createServer, request } from "node:http";
import { z } from "zod";
import type { VmEngine } from "../../src/workspace/vm/engine.ts";
import { createFlyEngine, type FlyEngineOptions } from "../../src/workspace/vm/fly.ts";
import { type EngineFake, type FakeVm, IMAGE, startEngineFake } from "./engine-fake.ts";

export const FLY_APP = "vmpilot-workspaces";

const createBody = z.object({
  region: z.string().optional(),
  config: z.object({
    image: z.string(),
    guest: z.object({ cpu_kind: z.string(), cpus: z.number(), memory_mb: z.number() }),
    auto_destroy: z.boolean(),
    restart: z.object({ policy: z.string() }),
    env: z.record(z.string(), z.string()),
    metadata: z.record(z.string(), z.string()),
    services: z
      .array(
        z.object({
          protocol: z.literal("tcp"),
          internal_port: z.number(),
          autostart: z.boolean(),
          autostop: z.enum(["off", "stop", "suspend"]),
          ports: z.array(z.object({ port: z.number(), handlers: z.array(z.string()) })),
        }),
      )
      .optional(),
  }),
});

interface Machine {
  id: string;
  instanceId: string;
  vm: FakeVm;
  config: z.output<typeof createBody>["config"];
  createdAt: string;
}

export interface FlyFake extends EngineFake {
  machines: Map<string, Machine>;
  /** With `flycast`: the workspace app's Flycast address, in front of the agents' port. */
  flycast?: Flycast;
}

export interface FlyFakeOptions {
  /** A Flycast address as the Fly Proxy serves it (below). */
  flycast?: boolean;
  /** The app has a network of its own: a Machine's private_ip is no address the worker reaches. */
  isolated?: boolean;
}

export async function startFlyFake(options: FlyFakeOptions = {}): Promise<FlyFake> {
  const machines = new Map<string, Machine>();
  const view = (m: Machine) => ({
    id: m.id,
    name: `fake-${m.id}`,
    state: "started",
    region: "ams",
    instance_id: m.instanceId,
    private_ip: options.isolated ? `fdaa:0:ffff:a7b:1::${m.id.slice(0, 4)}` : m.vm.ip,
    config: m.config,
    created_at: m.createdAt,
  });
  const fake = await startEngineFake({
    errorBody: (_status, message) => ({ error: message }),
    handle: (vms) => async (req, url, body) => {
      const match = /^\/v1\/apps\/([^/]+)\/machines(?:\/([^/]+)(\/wait)?)?$/.exec(url.pathname);
      if (!match || match[1] !== FLY_APP) return [404, { error: "app not found" }];
      const [, , id, wait] = match;
      if (req.method === "POST" && !id) {
        const parsed = createBody.parse(body);
        if (parsed.config.image !== IMAGE) {
          return [422, { error: `failed to resolve image ${parsed.config.image}` }];
        }
        const { VMPILOT_AGENT_SECRET: secret = "", ...agentEnv } = parsed.config.env;
        const vm = await vms.start(secret, agentEnv);
        const machine = {
          id: randomBytes(7).toString("hex"),
          instanceId: randomBytes(8).toString("hex").toUpperCase(),
          vm,
          config: parsed.config,
          createdAt: new Date().toISOString(),
        };
        machines.set(machine.id, machine);
        // As Fly does: a Machine made with auto_destroy is destroyed once its process exits.
        if (parsed.config.auto_destroy) {
          void vm.exited.then(async () => {
            machines.delete(machine.id);
            await vm.stop();
          });
        }
        return [200, { ...view(machine), state: "created" }];
      }
      if (req.method === "GET" && !id) return [200, [...machines.values()].map(view)];
      const machine = id ? machines.get(id) : undefined;
      if (!machine) return [404, { error: "machine not found" }];
      if (req.method === "GET" && wait) {
        if (url.searchParams.get("state") !== "started") return [400, { error: "bad state" }];
        return [200, { ok: true }];
      }
      if (req.method === "GET") return [200, view(machine)];
      if (req.method === "DELETE") {
        machines.delete(machine.id);
        await machine.vm.stop();
        return [200, { ok: true }];
      }
      return [405, { error: "method not allowed" }];
    },
  });
  if (!options.flycast) return Object.assign(fake, { machines });
  const flycast = await startFlycast(machines, fake.vms.port);
  const close = fake.close;
  return Object.assign(fake, {
    machines,
    flycast,
    close: async () => {
      await flycast.close();
      await close();
    },
  });
}

export interface Flycast {
  /** The address the worker dials; the agents' port. */
  address: string;
  /** Requests routed, as "METHOD /path -> machine id". */
  routed: string[];
  /** Requests the proxy could not route to one Machine: a test that sees any has a bug. */
  unrouted: string[];
  close(): Promise<void>;
}

/**
 * The Fly Proxy behind a Flycast address, with the `http` handler: a request goes to the Machine
 * fly-force-instance-id names, and only to a port its services declare. (Without the header the
 * real proxy picks any Machine of the app; here that is recorded as unrouted.)
 */
async function startFlycast(machines: Map<string, Machine>, port: number): Promise<Flycast> {
  const address = "127.1.0.1";
  const routed: string[] = [];
  const unrouted: string[] = [];
  const server = createServer((req, res) => {
    const id = req.headers["fly-force-instance-id"];
    const machine = typeof id === "string" ? machines.get(id) : undefined;
    const served = machine?.config.services?.some(
      (service) =>
        service.internal_port === port &&
        service.ports.some((p) => p.port === port && p.handlers.includes("http")),
    );
    const line = `${req.method} ${req.url?.replace(/\?.*/, "")}`;
    if (!machine || !served) {
      unrouted.push(`${line} (instance ${String(id)})`);
      res.writeHead(503).end();
      return;
    }
    routed.push(`${line} -> ${machine.id}`);
    const upstream = request(
      { host: machine.vm.ip, port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(port, address, resolve));
  return {
    address,
    routed,
    unrouted,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** The `fly` engine pointed at this fake: a small Machine, a deadline of an hour. */
export function flyEngine(fake: EngineFake, options: Partial<FlyEngineOptions> = {}): VmEngine {
  return createFlyEngine({
    token: fake.token,
    app: FLY_APP,
    image: fake.image,
    cpus: 1,
    memoryMb: 1024,
    deadlineSeconds: 3600,
    port: fake.vms.port,
    apiUrl: fake.url,
    ...options,
  });
}
