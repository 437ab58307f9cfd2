// The VM engines' settings, read from the environment, so the worker, the chat turns and the CLI
// configure an engine the same way. Missing or malformed settings name the variables.
import { z } from "zod";
import type { Logger } from "../../log/logger.ts";
import { registerSecret } from "../../log/redact.ts";
import { SandboxUnavailableError } from "../sandbox/bwrap.ts";
import type { VmEngine } from "./engine.ts";
import { createFlyEngine } from "./fly.ts";
import { createEgressGateway, type EgressGateway } from "./gateway.ts";
import { createKubernetesEngine } from "./kubernetes.ts";

const blank = (value: unknown) => (value === "" ? undefined : value);
const text = () => z.preprocess(blank, z.string().min(1));
const int = (min: number, max: number, fallback: number) =>
  z.preprocess(blank, z.coerce.number().int().min(min).max(max).default(fallback));

const port = int(1, 65_535, 8080);

const address = z.preprocess(blank, z.union([z.ipv4(), z.ipv6()]).optional());
const HOST_NAME =
  /^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/;
const flycast = z.preprocess(
  blank,
  z.union([z.ipv6(), z.ipv4(), z.string().regex(HOST_NAME)]).optional(),
);

const fly = z.object({
  FLY_API_TOKEN: text(),
  FLY_WORKSPACE_APP: text(),
  FLY_WORKSPACE_IMAGE: text(),
  FLY_WORKSPACE_CPUS: int(1, 16, 2),
  FLY_WORKSPACE_MEMORY_MB: int(256, 131_072, 4096),
  FLY_WORKSPACE_REGION: z.preprocess(blank, z.string().optional()),
  FLY_API_URL: z.preprocess(blank, z.url().optional()),
  FLY_DEADLINE_SECONDS: int(60, 7 * 86_400, 4 * 3600),
  WORKSPACE_AGENT_PORT: port,
});

/** Network isolation (fly-network.ts, gateway.ts): both addresses, or neither. */
const flyIsolation = z
  .object({
    FLY_WORKSPACE_FLYCAST: flycast,
    FLY_WORKER_FLYCAST: flycast,
    FLY_WORKER_PROXY_PORT: int(1, 65_535, 3128),
    WORKSPACE_PROXY_HOST: address,
    // Fly sets these on its Machines: the worker's own name, and its app's.
    FLY_MACHINE_ID: z.preprocess(
      blank,
      z
        .string()
        .regex(/^[a-z0-9]{1,32}$/)
        .optional(),
    ),
    FLY_APP_NAME: z.preprocess(blank, z.string().regex(HOST_NAME).optional()),
  })
  .superRefine((s, ctx) => {
    const problem = (path: string, message: string) =>
      ctx.addIssue({ code: "custom", path: [path], message });
    if (!s.FLY_WORKSPACE_FLYCAST !== !s.FLY_WORKER_FLYCAST) {
      problem(
        s.FLY_WORKSPACE_FLYCAST ? "FLY_WORKER_FLYCAST" : "FLY_WORKSPACE_FLYCAST",
        "isolation needs both Flycast addresses: the worker reaches the workspace agents through FLY_WORKSPACE_FLYCAST, the VMs reach the worker's proxy through FLY_WORKER_FLYCAST",
      );
    }
    if (!s.FLY_WORKER_FLYCAST) return;
    if (s.WORKSPACE_PROXY_HOST) {
      problem(
        "WORKSPACE_PROXY_HOST",
        "an isolated VM cannot reach it; unset it, the VMs reach the proxy at FLY_WORKER_FLYCAST",
      );
    }
    if (!s.FLY_MACHINE_ID || !s.FLY_APP_NAME) {
      problem("FLY_MACHINE_ID", "isolation works only with the worker on a Fly Machine");
    }
  });

const quantity = (fallback: string) =>
  z.preprocess(
    blank,
    z
      .string()
      .regex(/^[0-9.]+[a-zA-Z]{0,2}$/)
      .default(fallback),
  );

const kubernetes = z.object({
  KUBERNETES_NAMESPACE: z.preprocess(blank, z.string().default("vmpilot-workspaces")),
  KUBERNETES_WORKSPACE_IMAGE: text(),
  KUBERNETES_WORKSPACE_CPU: quantity("2"),
  KUBERNETES_WORKSPACE_MEMORY: quantity("4Gi"),
  KUBERNETES_RUNTIME_CLASS: z.preprocess(blank, z.string().optional()),
  KUBERNETES_DEADLINE_SECONDS: int(60, 7 * 86_400, 4 * 3600),
  WORKSPACE_AGENT_PORT: port,
});

function settings<T extends z.ZodType>(schema: T, env: NodeJS.ProcessEnv, name: string) {
  const parsed = schema.safeParse(env);
  if (parsed.success) return parsed.data as z.output<T>;
  const fields = parsed.error.issues
    .map((issue) => {
      const field = issue.path.join(".");
      return issue.code === "custom" ? `${field} (${issue.message})` : field;
    })
    .join(", ");
  throw new SandboxUnavailableError(`the ${name} engine needs valid ${fields}`);
}

/** A VM engine, as the environment configures it. */
export function engineFor(name: "fly" | "kubernetes", env = process.env): VmEngine {
  if (name === "fly") {
    const s = settings(fly, env, name);
    const isolation = settings(flyIsolation, env, name);
    // Fly's tokens match no redaction pattern: logs and comments hide this one by its value.
    registerSecret(s.FLY_API_TOKEN);
    return createFlyEngine({
      token: s.FLY_API_TOKEN,
      app: s.FLY_WORKSPACE_APP,
      image: s.FLY_WORKSPACE_IMAGE,
      cpus: s.FLY_WORKSPACE_CPUS,
      memoryMb: s.FLY_WORKSPACE_MEMORY_MB,
      region: s.FLY_WORKSPACE_REGION,
      apiUrl: s.FLY_API_URL,
      port: s.WORKSPACE_AGENT_PORT,
      deadlineSeconds: s.FLY_DEADLINE_SECONDS,
      flycast: isolation.FLY_WORKSPACE_FLYCAST,
    });
  }
  const s = settings(kubernetes, env, name);
  return createKubernetesEngine({
    namespace: s.KUBERNETES_NAMESPACE,
    image: s.KUBERNETES_WORKSPACE_IMAGE,
    cpu: s.KUBERNETES_WORKSPACE_CPU,
    memory: s.KUBERNETES_WORKSPACE_MEMORY,
    runtimeClassName: s.KUBERNETES_RUNTIME_CLASS,
    deadlineSeconds: s.KUBERNETES_DEADLINE_SECONDS,
    port: s.WORKSPACE_AGENT_PORT,
  });
}

const egressHost = z.object({ WORKSPACE_PROXY_HOST: address, FLY_PRIVATE_IP: address });

/** Where a VM engine's egress proxies listen, and the gateway VMs reach them through, if any. */
export interface EgressRoute {
  host: string;
  gateway?: EgressGateway;
}

let shared: { key: string; gateway: EgressGateway } | undefined;

/** One gateway per process: it holds the one port the worker app declares for it. */
function sharedGateway(host: string, port: number, owner: string, app: string): EgressGateway {
  const key = JSON.stringify([host, port, owner, app]);
  if (shared?.key !== key) {
    void shared?.gateway.close();
    const locate = (other: string) => ({ host: `${other}.vm.${app}.internal`, port });
    shared = { key, gateway: createEgressGateway({ host, port, owner, locate }) };
  }
  return shared.gateway;
}

/**
 * WORKSPACE_PROXY_HOST: the worker's own address as its VMs reach it (the pod IP). On Fly it
 * defaults to the Machine's own 6PN address, which Fly puts in FLY_PRIVATE_IP. Set, each VM's
 * commands go through an allow-list proxy the worker runs there. With Fly network isolation the
 * proxies listen on loopback, and the VMs reach them through the gateway at FLY_WORKER_FLYCAST.
 */
export function egressFor(name: "fly" | "kubernetes", env = process.env): EgressRoute | undefined {
  if (name === "fly") {
    const s = settings(flyIsolation, env, name);
    if (s.FLY_WORKER_FLYCAST && s.FLY_MACHINE_ID && s.FLY_APP_NAME) {
      const gateway = sharedGateway(
        s.FLY_WORKER_FLYCAST,
        s.FLY_WORKER_PROXY_PORT,
        s.FLY_MACHINE_ID,
        s.FLY_APP_NAME,
      );
      return { host: "127.0.0.1", gateway };
    }
  }
  const s = settings(egressHost, env, name);
  const host = s.WORKSPACE_PROXY_HOST ?? (name === "fly" ? s.FLY_PRIVATE_IP : undefined);
  return host ? { host } : undefined;
}

/**
 * At a worker's start with the fly engine: without network isolation, one warning saying what a
 * job's commands share a network with; with it, the gateway starts listening, since the Fly Proxy
 * may send another worker's VMs to this one before it has a VM of its own.
 */
export async function startFlyNetwork(logger: Logger, env = process.env): Promise<void> {
  if (blank(env.FLY_WORKSPACE_FLYCAST) === undefined) {
    logger.warn(
      "fly workspaces share the organization's private network (6PN) with this worker and every other app of the organization, the database included: only the proxy variables keep a job's commands off them. Set FLY_WORKSPACE_FLYCAST and FLY_WORKER_FLYCAST (README: Fly network isolation), or use the kubernetes engine",
    );
    return;
  }
  try {
    await egressFor("fly", env)?.gateway?.listen();
  } catch (error) {
    logger.error(`fly workspaces cannot reach the egress proxy: ${(error as Error).message}`);
  }
}
