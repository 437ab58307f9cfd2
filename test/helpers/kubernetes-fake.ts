// A loopback Kubernetes API server for pods in one namespace: create, read, list by label selector
// and delete, with the API's own shapes (Pod, PodList, Status errors). A pod is Pending until its
// "node" (the real workspace agent, fake-vm.ts) runs, then Running and Ready at its podIP; a wrong
// image leaves it Pending with ErrImagePull, as a kubelet would.
import { z } from "zod";
import { type EngineFake, type FakeVm, IMAGE, startEngineFake } from "./engine-fake.ts";

export const NAMESPACE = "vmpilot-workspaces";

const podBody = z.object({
  metadata: z.object({ name: z.string(), labels: z.record(z.string(), z.string()) }),
  spec: z.object({
    restartPolicy: z.literal("Never"),
    activeDeadlineSeconds: z.number(),
    automountServiceAccountToken: z.literal(false),
    runtimeClassName: z.string().optional(),
    containers: z
      .array(
        z.object({
          image: z.string(),
          env: z.array(z.object({ name: z.string(), value: z.string() })),
          resources: z.object({ limits: z.record(z.string(), z.string()) }),
          securityContext: z.record(z.string(), z.unknown()).optional(),
        }),
      )
      .length(1),
  }),
});

interface Pod {
  body: z.output<typeof podBody>;
  created: string;
  vm?: FakeVm;
  pullError?: string;
}

export interface KubernetesFake extends EngineFake {
  pods: Map<string, Pod>;
  /** A kubeconfig for the fake, as KUBECONFIG would name it. */
  kubeconfig: string;
}

function status(code: number, reason: string, message: string) {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    code,
  };
}

function view(pod: Pod) {
  const container = pod.body.spec.containers[0];
  const running = pod.vm !== undefined;
  return {
    kind: "Pod",
    apiVersion: "v1",
    metadata: { ...pod.body.metadata, namespace: NAMESPACE, creationTimestamp: pod.created },
    spec: pod.body.spec,
    status: {
      phase: running ? "Running" : "Pending",
      podIP: pod.vm?.ip,
      conditions: [{ type: "Ready", status: running ? "True" : "False" }],
      containerStatuses: [
        {
          name: "agent",
          image: container?.image,
          ready: running,
          restartCount: 0,
          state: pod.pullError
            ? { waiting: { reason: "ErrImagePull", message: pod.pullError } }
            : running
              ? { running: {} }
              : { waiting: { reason: "ContainerCreating" } },
        },
      ],
    },
  };
}

function selects(selector: string, labels: Record<string, string>): boolean {
  return selector.split(",").every((term) => {
    const [key, value] = term.split("=");
    return key !== undefined && key in labels && (value === undefined || labels[key] === value);
  });
}

export async function startKubernetesFake(): Promise<KubernetesFake> {
  const pods = new Map<string, Pod>();
  const fake = await startEngineFake({
    errorBody: (code, message) =>
      status(code, code === 401 ? "Unauthorized" : "InternalError", message),
    handle: (vms, problems) => async (req, url, body) => {
      const match = /^\/api\/v1\/namespaces\/([^/]+)\/pods(?:\/([^/]+))?$/.exec(url.pathname);
      if (!match) return [404, status(404, "NotFound", "the server could not find the resource")];
      const [, namespace, name] = match;
      if (namespace !== NAMESPACE) {
        return [404, status(404, "NotFound", `namespaces "${namespace}" not found`)];
      }
      if (req.method === "POST" && !name) {
        const parsed = podBody.parse(body);
        const podName = parsed.metadata.name;
        if (pods.has(podName)) {
          return [409, status(409, "AlreadyExists", `pods "${podName}" already exists`)];
        }
        const container = parsed.spec.containers[0];
        const pod: Pod = { body: parsed, created: new Date().toISOString() };
        pods.set(podName, pod);
        if (container?.image !== IMAGE) {
          pod.pullError = `failed to pull image "${container?.image}": not found`;
        } else {
          const secret = container.env.find((e) => e.name === "VMPILOT_AGENT_SECRET")?.value ?? "";
          // The kubelet starts the pod after the API answered.
          vms.start(secret).then(
            async (vm) => {
              if (pods.get(podName) === pod) pod.vm = vm;
              else await vm.stop();
            },
            (error: Error) => problems.push(`pod ${podName}: ${error.message}`),
          );
        }
        return [201, view(pod)];
      }
      if (req.method === "GET" && !name) {
        const selector = url.searchParams.get("labelSelector") ?? "";
        const items = [...pods.values()]
          .filter((pod) => selects(selector, pod.body.metadata.labels))
          .map(view);
        return [200, { kind: "PodList", apiVersion: "v1", metadata: {}, items }];
      }
      const pod = name ? pods.get(name) : undefined;
      if (!pod) return [404, status(404, "NotFound", `pods "${name}" not found`)];
      if (req.method === "GET") return [200, view(pod)];
      if (req.method === "DELETE") {
        pods.delete(pod.body.metadata.name);
        await pod.vm?.stop();
        return [200, view(pod)];
      }
      return [405, status(405, "MethodNotAllowed", "method not allowed")];
    },
  });
  const kubeconfig = JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    // The client talks plain HTTP only with TLS checks off; the fake has no certificate.
    clusters: [{ name: "fake", cluster: { server: fake.url, "insecure-skip-tls-verify": true } }],
    users: [{ name: "vmpilot", user: { token: fake.token } }],
    contexts: [
      { name: "fake", context: { cluster: "fake", user: "vmpilot", namespace: NAMESPACE } },
    ],
    "current-context": "fake",
  });
  return Object.assign(fake, { pods, kubeconfig });
}
