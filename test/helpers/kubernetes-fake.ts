// A loopback Kubernetes API server for pods in one namespace: create, list and watch by label and
// field selector, and delete, with the API's own shapes (Pod, PodList, Status errors) and
// resourceVersions. A pod is Pending until its "node" (the real workspace agent, fake-vm.ts) runs,
// then Running and Ready at its podIP; a wrong image leaves it Pending with ErrImagePull, as a
// kubelet would. A watch is the API server's: a chunked stream of one JSON event a line, from the
// resourceVersion asked for, and an ERROR event with a 410 Status for one older than its history.
import type { ServerResponse } from "node:http";
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
  /** The revision of its last change. */
  version: number;
  vm?: FakeVm;
  pullError?: string;
}

type EventType = "ADDED" | "MODIFIED" | "DELETED";

interface Change {
  version: number;
  type: EventType;
  pod: Pod;
  /** The pod as it was then. */
  object: unknown;
}

interface Watcher {
  selects(pod: Pod): boolean;
  res: ServerResponse;
}

export interface KubernetesFake extends EngineFake {
  pods: Map<string, Pod>;
  /** A kubeconfig for the fake, as KUBECONFIG would name it. */
  kubeconfig: string;
  /** The query of each watch asked for, in order. */
  watches: URLSearchParams[];
  /** Settles once that many watches have been opened in all. */
  untilWatches(count: number): Promise<void>;
  /** Cuts every open watch's connection, as a network failure or an API server restart does. */
  breakWatches(): void;
  /** Pods whose node starts from now stay Pending until the returned function is called. */
  hold(): () => void;
  /** Other writes move the revision on, then the history up to it is dropped, as etcd compacts. */
  compact(): void;
}

const QUERY = ["watch", "labelSelector", "fieldSelector", "resourceVersion"];

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
    metadata: {
      ...pod.body.metadata,
      namespace: NAMESPACE,
      creationTimestamp: pod.created,
      resourceVersion: String(pod.version),
    },
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
  return selector
    .split(",")
    .filter(Boolean)
    .every((term) => {
      const [key, value] = term.split("=");
      return key !== undefined && key in labels && (value === undefined || labels[key] === value);
    });
}

const isWatch = (url: URL) => ["true", "1"].includes(url.searchParams.get("watch") ?? "");

/** The pods a list or watch asks for; throws on what the fake does not understand. */
function selector(url: URL): (pod: Pod) => boolean {
  for (const key of url.searchParams.keys()) {
    if (!QUERY.includes(key)) throw new Error(`unsupported query parameter ${key}`);
  }
  const labels = url.searchParams.get("labelSelector") ?? "";
  const fields = (url.searchParams.get("fieldSelector") ?? "").split(",").filter(Boolean);
  const names = fields.map((term) => {
    const match = /^metadata\.name==?(.+)$/.exec(term);
    if (!match) throw new Error(`unsupported field selector ${term}`);
    return match[1];
  });
  return (pod) =>
    selects(labels, pod.body.metadata.labels) &&
    names.every((name) => name === pod.body.metadata.name);
}

export async function startKubernetesFake(): Promise<KubernetesFake> {
  const pods = new Map<string, Pod>();
  const history: Change[] = [];
  const watchers = new Set<Watcher>();
  const watches: URLSearchParams[] = [];
  const waiting: Array<{ count: number; resolve(): void }> = [];
  let revision = 1;
  let compacted = 0;
  let held: Promise<void> | undefined;
  const line = (type: string, object: unknown) => `${JSON.stringify({ type, object })}\n`;
  const change = (type: EventType, pod: Pod) => {
    revision += 1;
    pod.version = revision;
    const object = view(pod);
    history.push({ version: revision, type, pod, object });
    for (const watcher of watchers) {
      if (watcher.selects(pod)) watcher.res.write(line(type, object));
    }
  };
  const watched = (query: URLSearchParams) => {
    watches.push(query);
    for (const waiter of waiting.filter((w) => watches.length >= w.count)) {
      waiting.splice(waiting.indexOf(waiter), 1);
      waiter.resolve();
    }
  };
  const watch = (url: URL, res: ServerResponse) => {
    const filter = selector(url);
    const from = url.searchParams.get("resourceVersion") || "0";
    const since = Number(from);
    if (!Number.isInteger(since)) throw new Error(`resourceVersion ${from} is not one of ours`);
    res.writeHead(200, { "content-type": "application/json" });
    watched(url.searchParams);
    if (since !== 0 && since < compacted) {
      const message = `too old resource version: ${since} (${compacted})`;
      res.end(line("ERROR", status(410, "Expired", message)));
      return;
    }
    // From "0" (or none), the pods as they are now, each as ADDED; else what changed since.
    const replay =
      since === 0
        ? [...pods.values()].map((pod) => ({ type: "ADDED", pod, object: view(pod) }))
        : history.filter((c) => c.version > since);
    for (const { type, pod, object } of replay) {
      if (filter(pod)) res.write(line(type, object));
    }
    const watcher = { selects: filter, res };
    watchers.add(watcher);
    res.on("close", () => watchers.delete(watcher));
  };
  const fake = await startEngineFake({
    verb: (req, url) => (req.method === "GET" && isWatch(url) ? "WATCH" : (req.method ?? "")),
    errorBody: (code, message) =>
      status(code, code === 401 ? "Unauthorized" : "InternalError", message),
    handle: (vms, problems) => async (req, url, body, res) => {
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
        const pod: Pod = { body: parsed, created: new Date().toISOString(), version: 0 };
        pods.set(podName, pod);
        if (container?.image !== IMAGE) {
          pod.pullError = `failed to pull image "${container?.image}": not found`;
        }
        change("ADDED", pod);
        if (container?.image === IMAGE) {
          const secret = container.env.find((e) => e.name === "VMPILOT_AGENT_SECRET")?.value ?? "";
          // The kubelet starts the pod after the API answered.
          vms.start(secret).then(
            async (vm) => {
              await held;
              if (pods.get(podName) !== pod) return vm.stop();
              pod.vm = vm;
              change("MODIFIED", pod);
            },
            (error: Error) => problems.push(`pod ${podName}: ${error.message}`),
          );
        }
        return [201, view(pod)];
      }
      if (req.method === "GET" && !name && isWatch(url)) {
        watch(url, res);
        return "answered";
      }
      if (req.method === "GET" && !name) {
        const items = [...pods.values()].filter(selector(url)).map(view);
        const metadata = { resourceVersion: String(revision) };
        return [200, { kind: "PodList", apiVersion: "v1", metadata, items }];
      }
      const pod = name ? pods.get(name) : undefined;
      if (!pod) return [404, status(404, "NotFound", `pods "${name}" not found`)];
      if (req.method === "DELETE") {
        pods.delete(pod.body.metadata.name);
        change("DELETED", pod);
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
  return Object.assign(fake, {
    pods,
    kubeconfig,
    watches,
    untilWatches: (count: number) =>
      watches.length >= count
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiting.push({ count, resolve })),
    breakWatches() {
      for (const watcher of watchers) watcher.res.destroy();
    },
    hold() {
      let release = () => {};
      held = new Promise((resolve) => {
        release = resolve;
      });
      return release;
    },
    compact() {
      revision += 1;
      compacted = revision;
      history.length = 0;
    },
  });
}
