// The VM engines' settings, read from the environment, so the worker, the chat turns and the CLI
// configure an engine the same way. Missing or malformed settings name the variables.
import { z } from "zod";
import { registerSecret } from "../../github/redact.ts";
import { SandboxUnavailableError } from "../bwrap.ts";
import type { VmEngine } from "./engine.ts";
import { createFlyEngine } from "./fly.ts";
import { createKubernetesEngine } from "./kubernetes.ts";

const blank = (value: unknown) => (value === "" ? undefined : value);
const text = () => z.preprocess(blank, z.string().min(1));
const int = (min: number, max: number, fallback: number) =>
  z.preprocess(blank, z.coerce.number().int().min(min).max(max).default(fallback));

const port = int(1, 65_535, 8080);

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
  const fields = parsed.error.issues.map((issue) => issue.path.join(".")).join(", ");
  throw new SandboxUnavailableError(`WORKSPACE_PROVIDER=${name} needs valid ${fields}`);
}

/** A VM provider's engine, as the environment configures it. */
export function engineFor(name: "fly" | "kubernetes", env = process.env): VmEngine {
  if (name === "fly") {
    const s = settings(fly, env, name);
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

const address = z.preprocess(blank, z.union([z.ipv4(), z.ipv6()]).optional());
const egressHost = z.object({ WORKSPACE_PROXY_HOST: address, FLY_PRIVATE_IP: address });

/**
 * WORKSPACE_PROXY_HOST: the worker's own address as its VMs reach it (the pod IP). On Fly it
 * defaults to the Machine's own 6PN address, which Fly puts in FLY_PRIVATE_IP. Set, each VM's
 * commands go through an allow-list proxy the worker runs there.
 */
export function egressHostFor(name: "fly" | "kubernetes", env = process.env): string | undefined {
  const s = settings(egressHost, env, name);
  return s.WORKSPACE_PROXY_HOST ?? (name === "fly" ? s.FLY_PRIVATE_IP : undefined);
}
