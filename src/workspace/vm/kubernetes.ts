// The `kubernetes` engine: one Pod per workspace in a namespace of its own, made with the official
// client. The pod never restarts, has a deadline, mounts no service account token and may be given
// a sandboxed runtime (gVisor, Kata) through runtimeClassName; deploy/kubernetes/ holds the
// NetworkPolicy that keeps it off everything but its egress proxy.
import { randomBytes } from "node:crypto";
import type { CoreV1Api, KubeConfig, V1Pod } from "@kubernetes/client-node";
import { agentUrl, isGone, type VmEngine, type VmListing, type VmSpec } from "./engine.ts";
import { failure, waitRunning } from "./kubernetes-start.ts";

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

type Client = typeof import("@kubernetes/client-node");

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

export function createKubernetesEngine(options: KubernetesEngineOptions): VmEngine {
  const { namespace } = options;
  // The client adds about 130 MB to a process, so it is loaded when the engine is first used.
  let loaded: Promise<{ k8s: Client; api: CoreV1Api; config: KubeConfig }> | undefined;
  const client = () => {
    loaded ??= import("@kubernetes/client-node").then((k8s) => {
      const config = options.kubeConfig ?? new k8s.KubeConfig();
      if (!options.kubeConfig) config.loadFromDefault();
      return { k8s, api: config.makeApiClient(k8s.CoreV1Api), config };
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

  return {
    name: "kubernetes",
    async create(spec, signal) {
      const name = `vmpilot-${spec.owner
        .toLowerCase()
        .replace(/[^a-z0-9-]/g, "-")
        .slice(0, 40)}-${randomBytes(3).toString("hex")}`;
      const { k8s, api, config } = await client();
      try {
        await api.createNamespacedPod({
          namespace,
          body: podSpec(options, name, spec),
        });
      } catch (error) {
        throw failure(error, k8s);
      }
      try {
        const timeoutMs = options.startTimeoutMs ?? 5 * 60_000;
        const ip = await waitRunning({ k8s, api, config, namespace, name, timeoutMs, signal });
        return { id: name, baseUrl: agentUrl(ip, options.port) };
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
