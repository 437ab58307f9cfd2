// A loopback Fly Machines API (https://fly.io/docs/machines/api/): create, wait, get, list and
// destroy Machines of one app, with Fly's shapes ({"error": "..."} bodies, private_ip on the
// private network, metadata in config). Each Machine runs the real workspace agent.
import { randomBytes } from "node:crypto";
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
}

export async function startFlyFake(): Promise<FlyFake> {
  const machines = new Map<string, Machine>();
  const view = (m: Machine) => ({
    id: m.id,
    name: `fake-${m.id}`,
    state: "started",
    region: "ams",
    instance_id: m.instanceId,
    private_ip: m.vm.ip,
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
  return Object.assign(fake, { machines });
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
