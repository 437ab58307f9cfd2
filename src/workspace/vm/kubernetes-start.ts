// Waiting for a workspace pod to run, as Kubernetes clients do: one list gives the pod and the
// resourceVersion it was read at, then a watch from there reports each change as it happens, so a
// pod that runs is seen at once, without polling. A watch that ends or breaks is opened again from
// the last version seen; one the API server no longer has history for (410) starts over with a list.
import { setTimeout as sleep } from "node:timers/promises";
import type { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { z } from "zod";
import { engineError, VmFailed, VmRefused } from "./engine.ts";

type Client = typeof import("@kubernetes/client-node");

/** Container states another attempt would meet again: the image or the pod spec is wrong. */
const BROKEN = [
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "CreateContainerConfigError",
];
/** Between watches that brought nothing, so a server that keeps closing them is not hammered. */
const RETRY_START_MS = 250;
const RETRY_MAX_MS = 2000;

/** What the wait reads of a pod: a V1Pod from the client's reads, or a watch event's object. */
const podState = z.object({
  metadata: z.object({ resourceVersion: z.string().optional() }).optional(),
  status: z
    .object({
      phase: z.string().optional(),
      message: z.string().optional(),
      podIP: z.string().optional(),
      conditions: z.array(z.object({ type: z.string(), status: z.string() })).optional(),
      containerStatuses: z
        .array(
          z.object({
            state: z
              .object({
                waiting: z
                  .object({ reason: z.string().optional(), message: z.string().optional() })
                  .optional(),
              })
              .optional(),
          }),
        )
        .optional(),
    })
    .optional(),
});
type PodState = z.output<typeof podState>;

/** The object of a watch's ERROR event: a Status. */
const watchStatus = z.object({ code: z.number().optional() });
/** How the client's Watch reports an HTTP answer other than 200. */
const watchRefused = z.object({ statusCode: z.number(), message: z.string() });

export function failure(error: unknown, k8s: Client): Error {
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

/** The pod's address once it runs and is ready; throws if it never will. */
function running(pod: PodState): string | undefined {
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

export interface PodWait {
  k8s: Client;
  api: CoreV1Api;
  config: KubeConfig;
  namespace: string;
  name: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

/** How one watch ended, when it did not throw. */
type Watched =
  | { ip: string }
  /** It ended or broke: watch again from `version`; `changed`: it brought the pod's changes. */
  | { version: string; changed: boolean }
  /** The server no longer has history back to the version asked for. */
  | { expired: true };

const deleted = (name: string) => new VmFailed(`the workspace pod ${name} was deleted`);

function watchOnce(wait: PodWait, version: string, stop: AbortSignal): Promise<Watched> {
  const { k8s, config, namespace, name } = wait;
  return new Promise((resolve, reject) => {
    let latest = version;
    let changed = false;
    let settled = false;
    let controller: AbortController | undefined;
    const settle = (end: () => void) => {
      if (settled) return;
      settled = true;
      stop.removeEventListener("abort", aborted);
      controller?.abort();
      end();
    };
    const aborted = () => settle(() => reject(stop.reason));
    stop.addEventListener("abort", aborted, { once: true });
    const event = (type: string, object: unknown) => {
      if (type === "ERROR") {
        const status = watchStatus.safeParse(object);
        const code = status.success ? status.data.code : undefined;
        settle(() => resolve(code === 410 ? { expired: true } : { version: latest, changed }));
        return;
      }
      const pod = podState.parse(object);
      latest = pod.metadata?.resourceVersion ?? latest;
      if (type === "BOOKMARK") return;
      changed = true;
      if (type === "DELETED") throw deleted(name);
      const ip = running(pod);
      if (ip) settle(() => resolve({ ip }));
    };
    new k8s.Watch(config)
      .watch(
        `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
        { fieldSelector: `metadata.name=${name}`, resourceVersion: version || undefined },
        (type, object) => {
          try {
            event(type, object);
          } catch (error) {
            settle(() => reject(error));
          }
        },
        (error: unknown) => {
          const refused = watchRefused.safeParse(error);
          if (!refused.success) settle(() => resolve({ version: latest, changed }));
          else if (refused.data.statusCode === 410) settle(() => resolve({ expired: true }));
          else {
            const { statusCode, message } = refused.data;
            settle(() => reject(engineError("the Kubernetes API", statusCode, message)));
          }
        },
      )
      .then(
        (opened) => {
          controller = opened;
          if (settled) opened.abort();
        },
        (error: unknown) => settle(() => reject(failure(error, k8s))),
      );
  });
}

/** The pod's address once it runs; throws what keeps it from running, at the deadline or on abort. */
export async function waitRunning(wait: PodWait): Promise<string> {
  const { k8s, api, namespace, name } = wait;
  const deadline = new AbortController();
  const timer = setTimeout(
    () => deadline.abort(new VmFailed(`the workspace pod ${name} did not start`)),
    wait.timeoutMs,
  );
  const stop = wait.signal ? AbortSignal.any([wait.signal, deadline.signal]) : deadline.signal;
  try {
    let version: string | undefined;
    let pause = RETRY_START_MS;
    for (;;) {
      stop.throwIfAborted();
      if (version === undefined) {
        const list = await api
          .listNamespacedPod({ namespace, fieldSelector: `metadata.name=${name}` })
          .catch((error) => {
            throw failure(error, k8s);
          });
        const [pod] = list.items;
        if (!pod) throw deleted(name);
        const ip = running(pod);
        if (ip) return ip;
        version = list.metadata?.resourceVersion ?? "";
        pause = RETRY_START_MS;
      }
      stop.throwIfAborted();
      const watched = await watchOnce(wait, version, stop);
      if ("ip" in watched) return watched.ip;
      if ("expired" in watched) {
        version = undefined;
        continue;
      }
      version = watched.version;
      if (watched.changed) {
        pause = RETRY_START_MS;
        continue;
      }
      await sleep(pause, undefined, { signal: stop }).catch(() => stop.throwIfAborted());
      pause = Math.min(pause * 2, RETRY_MAX_MS);
    }
  } finally {
    clearTimeout(timer);
  }
}
