// The `fly` engine: one Fly Machine (a Firecracker microVM) per workspace, through the Machines
// REST API. The Machine runs the workspace image, whose entry is the workspace agent; it is made
// with auto_destroy and no restarts, so a Machine whose workspace agent exits is gone on its own as
// well.
import { z } from "zod";
import {
  agentUrl,
  engineError,
  isGone,
  type VmEngine,
  VmFailed,
  type VmListing,
} from "./engine.ts";
import { agentService, checkIsolated, FORCE_INSTANCE } from "./fly-network.ts";

export interface FlyEngineOptions {
  token: string;
  /** The Fly app the workspace Machines belong to (not the app vmpilot itself runs in). */
  app: string;
  image: string;
  cpus: number;
  memoryMb: number;
  region?: string;
  /** The port the workspace agent listens on inside the Machine. */
  port: number;
  /**
   * The workspace agent exits this long after its checkout (or its boot, for a VM never given a
   * job), and the Machine is destroyed with it: Fly has no deadline of its own, as a pod does.
   */
  deadlineSeconds: number;
  /** Default https://api.machines.dev; inside Fly, http://_api.internal:4280 also works. */
  apiUrl?: string;
  /**
   * Network isolation (fly-network.ts): the workspace app's Flycast address in the worker's
   * network, or `<app>.flycast`. Set, the worker reaches each workspace agent only through it.
   */
  flycast?: string;
  /** Whether the worker reaches a Machine's own address; default a TCP connect (fly-network.ts). */
  reachable?: (address: string, port: number) => Promise<boolean>;
}

const OWNER = "vmpilot-owner";

const machine = z.object({
  id: z.string().min(1),
  private_ip: z.string().optional(),
  instance_id: z.string().optional(),
  config: z.object({ metadata: z.record(z.string(), z.string()).nullish() }).nullish(),
});
const errorBody = z.object({ error: z.string() });
/** A list of many Machines fits well within this; more is not read. */
const MAX_ANSWER_BYTES = 10 * 1024 * 1024;

async function cappedText(res: Response): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body ?? []) {
    size += chunk.length;
    if (size > MAX_ANSWER_BYTES) {
      await res.body?.cancel();
      throw new VmFailed("the Fly Machines API's answer is too large");
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

export function createFlyEngine(options: FlyEngineOptions): VmEngine {
  const base = `${options.apiUrl ?? "https://api.machines.dev"}/v1/apps/${encodeURIComponent(options.app)}/machines`;

  async function api(method: string, path: string, body?: unknown, signal?: AbortSignal) {
    let res: Response;
    try {
      res = await fetch(`${base}${path}`, {
        method,
        signal,
        headers: {
          authorization: `Bearer ${options.token}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      if (signal?.aborted) throw error;
      throw new VmFailed(`the Fly Machines API is unreachable: ${(error as Error).message}`);
    }
    const text = await cappedText(res);
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const parsed = errorBody.safeParse(json);
      throw engineError(
        "the Fly Machines API",
        res.status,
        parsed.success ? parsed.data.error : "",
      );
    }
    return json;
  }

  async function destroy(id: string): Promise<void> {
    try {
      await api("DELETE", `/${encodeURIComponent(id)}?force=true`);
    } catch (error) {
      if (!isGone(error)) throw error;
    }
  }

  return {
    name: "fly",
    async create(spec, signal) {
      const created = machine.parse(
        await api(
          "POST",
          "",
          {
            region: options.region,
            config: {
              image: options.image,
              guest: { cpu_kind: "shared", cpus: options.cpus, memory_mb: options.memoryMb },
              auto_destroy: true,
              restart: { policy: "no" },
              env: {
                VMPILOT_AGENT_SECRET: spec.secret,
                VMPILOT_AGENT_DEADLINE_SECONDS: String(options.deadlineSeconds),
              },
              metadata: { [OWNER]: spec.owner },
              services: options.flycast ? [agentService(options.port)] : undefined,
            },
          },
          signal,
        ),
      );
      try {
        const wait = new URLSearchParams({ state: "started", timeout: "60" });
        if (created.instance_id) wait.set("instance_id", created.instance_id);
        await api("GET", `/${encodeURIComponent(created.id)}/wait?${wait}`, undefined, signal);
        if (!created.private_ip) throw new VmFailed("the Fly Machine has no private address");
        if (!options.flycast) {
          return { id: created.id, baseUrl: agentUrl(created.private_ip, options.port) };
        }
        await checkIsolated(base, created.private_ip, options.port, options.reachable);
        return {
          id: created.id,
          baseUrl: agentUrl(options.flycast, options.port),
          headers: { [FORCE_INSTANCE]: created.id },
        };
      } catch (error) {
        await destroy(created.id).catch(() => undefined);
        throw error;
      }
    },
    destroy,
    async list(): Promise<VmListing[]> {
      const machines = z.array(machine).parse(await api("GET", ""));
      return machines
        .map((m) => ({ id: m.id, owner: m.config?.metadata?.[OWNER] }))
        .filter((m) => m.owner !== undefined);
    },
  };
}
