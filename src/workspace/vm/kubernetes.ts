// The `kubernetes` engine: one Pod per workspace in a namespace of its own, made with the official
// client. The pod never restarts, has a deadline, mounts no service account token and may be given
// a sandboxed runtime (gVisor, Kata) through runtimeClassName; deploy/kubernetes/ holds the
// NetworkPolicy that keeps it off everything but its egress proxy.
import { randomBytes } from "node:crypto";
import type { CoreV1Api, KubeConfig, V1Pod } from "@kubernetes/client-node";
import {
  agentUrl,
  engineError,
  isGone,
  type VmEngine,
  VmFailed,
  type VmListing,
  VmRefused,
  type VmSpec,
} from "./engine.ts";

export interface KubernetesEngineOptions {
  namespace: string;
  image: string;
  /** Kubernetes quantities: "2", "500m"; "4Gi". */
  cpu: string;
  memory: string;
  runtimeClassName?: string;
  port: number;
  /** The pod's activeDeadlineSeconds: the kubelet kills it after this, whatever the worker does. */
  deadlineSeconds: number;
  /** Default: in-cluster service account, else KUBECONFIG or ~/.kube/config. */
  kubeConfig?: KubeConfig;
  /** How long a pod may take to run its workspace agent (image pull included). Default 5 min. */
  startTimeoutMs?: number;
}

const OWNER = "vmpilot.dev/owner";
/** Container states another attempt would meet again: the image or the pod spec is wrong. */
const BROKEN = [
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "CreateContainerConfigError",
];
const WAIT_START_MS = 250;
const WAIT_MAX_MS = 2000;

type Client = typeof import("@kubernetes/client-node");

function failure(error: unknown, k8s: Client): Error {
  if (error instanceof k8s.ApiException) {
    const body = typeof error.body === "string" ? error.body : JSON.stringify(error.body ?? "");
    let message = body;
    try {
      message = (JSON.parse(body) as { message?: string }).message ?? body;
    } catch {}
    return engineError("the Kubernetes API", error.code, message);
  }
  return new VmFailed(`the Kubernetes API is unreachable: ${(error as Error).message}`);
}

function podSpec(options: KubernetesEngineOptions, name: string, spec: VmSpec) {
  const { owner, secret } = spec;
  const resources = { cpu: options.cpu, memory: options.memory };
  return {
    metadata: {
      name,
      labels: { "app.kubernetes.io/name": "vmpilot-workspace", [OWNER]: owner },
    },
    spec: {
      restartPolicy: "Never",
      activeDeadlineSeconds: options.deadlineSeconds,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      runtimeClassName: options.runtimeClassName,
      containers: [
        {
          name: "agent",
          image: options.image,
          env: [{ name: "VMPILOT_AGENT_SECRET", value: secret }],
          ports: [{ containerPort: options.port, name: "agent" }],
          resources: { requests: resources, limits: resources },
          // The workspace agent runs commands as the image's command user, who must not be able to
          // signal or read it (agent/identity.ts): it stays root, with the capabilities to start
          // and stop them and nothing else. Root, because a container gives added capabilities to a
          // non-root process only in its bounding set. The namespace's pod security level is
          // "baseline" for this (deploy/kubernetes/); no_new_privs keeps commands from regaining any.
          securityContext: {
            runAsUser: 0,
            runAsNonRoot: false,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ["ALL"], add: ["SETUID", "SETGID", "KILL"] },
            seccompProfile: { type: "RuntimeDefault" },
          },
        },
      ],
    },
  } satisfies V1Pod;
}

function running(pod: V1Pod): string | undefined {
  const phase = pod.status?.phase;
  if (phase === "Failed" || phase === "Succeeded") {
    throw new VmFailed(`the workspace pod ended (${phase}): ${pod.status?.message ?? ""}`.trim());
  }
  for (const container of pod.status?.containerStatuses ?? []) {
    const waiting = container.state?.waiting;
    if (waiting?.reason && BROKEN.includes(waiting.reason)) {
      throw new VmRefused(
        `the workspace pod cannot start: ${waiting.reason}: ${waiting.message ?? ""}`,
      );
    }
  }
  const ready = pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
  return phase === "Running" && ready ? pod.status?.podIP : undefined;
}

export function createKubernetesEngine(options: KubernetesEngineOptions): VmEngine {
  const { namespace } = options;
  // The client adds about 130 MB to a process, so it is loaded when the engine is first used.
  let loaded: Promise<{ k8s: Client; api: CoreV1Api }> | undefined;
  const client = () => {
    loaded ??= import("@kubernetes/client-node").then((k8s) => {
      const config = options.kubeConfig ?? new k8s.KubeConfig();
      if (!options.kubeConfig) config.loadFromDefault();
      return { k8s, api: config.makeApiClient(k8s.CoreV1Api) };
    });
    return loaded;
  };

  async function destroy(name: string): Promise<void> {
    const { k8s, api } = await client();
    try {
      await api.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
    } catch (error) {
      const failed = failure(error, k8s);
      if (!isGone(failed)) throw failed;
    }
  }

  async function waitRunning(name: string, signal?: AbortSignal): Promise<string> {
    const { k8s, api } = await client();
    const deadline = Date.now() + (options.startTimeoutMs ?? 5 * 60_000);
    let wait = WAIT_START_MS;
    for (;;) {
      signal?.throwIfAborted();
      const pod = await api.readNamespacedPod({ name, namespace }).catch((error) => {
        throw failure(error, k8s);
      });
      const ip = running(pod);
      if (ip) return ip;
      if (Date.now() > deadline) throw new VmFailed(`the workspace pod ${name} did not start`);
      // Polled with backoff: a pod takes seconds to schedule and pull, and each read is one call.
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, WAIT_MAX_MS);
    }
  }

  return {
    name: "kubernetes",
    async create(spec, signal) {
      const name = `vmpilot-${spec.owner
        .toLowerCase()
        .replace(/[^a-z0-9-]/g, "-")
        .slice(0, 40)}-${randomBytes(3).toString("hex")}`;
      const { k8s, api } = await client();
      try {
        await api.createNamespacedPod({
          namespace,
          body: podSpec(options, name, spec),
        });
      } catch (error) {
        throw failure(error, k8s);
      }
      try {
        return { id: name, baseUrl: agentUrl(await waitRunning(name, signal), options.port) };
      } catch (error) {
        await destroy(name).catch(() => undefined);
        throw error;
      }
    },
    destroy,
    async list(): Promise<VmListing[]> {
      const { k8s, api } = await client();
      const pods = await api
        .listNamespacedPod({ namespace, labelSelector: OWNER })
        .catch((error) => {
          throw failure(error, k8s);
        });
      return pods.items.map((pod) => ({
        id: pod.metadata?.name ?? "",
        owner: pod.metadata?.labels?.[OWNER],
      }));
    },
  };
}
