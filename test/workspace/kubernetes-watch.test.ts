// The Kubernetes engine waits for a pod as Kubernetes clients do: one list, then a watch from its
// resourceVersion, so it sees the pod run without reading it again and again. Against the API fake,
// whose pods stay Pending while held, so the test decides when a pod runs.
import { KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { VmFailed, VmRefused } from "../../src/workspace/vm/engine.ts";
import { createKubernetesEngine } from "../../src/workspace/vm/kubernetes.ts";
import { type KubernetesFake, NAMESPACE, startKubernetesFake } from "../helpers/kubernetes-fake.ts";

const PODS = `/api/v1/namespaces/${NAMESPACE}/pods`;

let fake: KubernetesFake;

beforeAll(async () => {
  fake = await startKubernetesFake();
});

afterAll(async () => {
  await fake.close();
});

beforeEach(() => {
  fake.calls.length = 0;
  fake.watches.length = 0;
});

function engine(startTimeoutMs = 30_000) {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(fake.kubeconfig);
  return createKubernetesEngine({
    namespace: NAMESPACE,
    image: fake.image,
    cpu: "1",
    memory: "1Gi",
    port: fake.vms.port,
    deadlineSeconds: 3600,
    kubeConfig,
    startTimeoutMs,
  });
}

describe("the kubernetes engine's wait for a pod", () => {
  it("lists the pod once, then sees it run from a watch, without polling", async () => {
    const kubernetes = engine();
    const release = fake.hold();
    const making = kubernetes.create({ owner: "job-80-1", secret: "s".repeat(40) });
    await fake.untilWatches(1);
    release();
    const vm = await making;
    expect(vm.baseUrl).toBe(`http://${fake.vms.list()[0]?.ip}:${fake.vms.port}`);
    expect(fake.calls).toEqual([`POST ${PODS}`, `GET ${PODS}`, `WATCH ${PODS}`]);
    expect(fake.watches[0]?.get("fieldSelector")).toBe(`metadata.name=${vm.id}`);
    expect(fake.watches[0]?.get("resourceVersion")).toMatch(/^[1-9]\d*$/);
    await kubernetes.destroy(vm.id);
    expect(fake.problems).toEqual([]);
  });

  it("opens a broken watch again from where it was, and lists again when that is too old", async () => {
    const kubernetes = engine();
    const release = fake.hold();
    const making = kubernetes.create({ owner: "job-81-1", secret: "s".repeat(40) });
    await fake.untilWatches(1);
    fake.breakWatches();
    await fake.untilWatches(2);
    const [first, second] = fake.watches;
    expect(second?.get("resourceVersion")).toBe(first?.get("resourceVersion"));
    // The API server no longer has that version: an ERROR event with a 410 Status, then a list.
    fake.compact();
    fake.breakWatches();
    await fake.untilWatches(4);
    const [, , gone, fresh] = fake.watches;
    expect(gone?.get("resourceVersion")).toBe(first?.get("resourceVersion"));
    expect(Number(fresh?.get("resourceVersion"))).toBeGreaterThan(
      Number(first?.get("resourceVersion")),
    );
    // The same as an HTTP 410 answer to the watch.
    fake.failNext({ method: "GET", status: 410 });
    fake.breakWatches();
    await fake.untilWatches(5);
    release();
    const vm = await making;
    expect(fake.calls).toEqual([
      `POST ${PODS}`,
      `GET ${PODS}`,
      `WATCH ${PODS}`,
      `WATCH ${PODS}`,
      `WATCH ${PODS}`,
      `GET ${PODS}`,
      `WATCH ${PODS}`,
      `WATCH ${PODS}`,
      `GET ${PODS}`,
      `WATCH ${PODS}`,
    ]);
    await kubernetes.destroy(vm.id);
    expect(fake.problems).toEqual([]);
  });

  it("stops when the caller gives up, the pod is deleted, the watch refused or the deadline passed", async () => {
    const release = fake.hold();
    const stop = new AbortController();
    const cancelled = engine().create({ owner: "job-82-1", secret: "s".repeat(40) }, stop.signal);
    await fake.untilWatches(1);
    stop.abort(new Error("the job was cancelled"));
    await expect(cancelled).rejects.toThrow("the job was cancelled");
    expect(fake.pods.size).toBe(0);

    const kubernetes = engine();
    const deleted = kubernetes.create({ owner: "job-84-1", secret: "s".repeat(40) });
    await fake.untilWatches(2);
    const [name] = fake.pods.keys();
    await kubernetes.destroy(name ?? "");
    await expect(deleted).rejects.toThrow(`the workspace pod ${name} was deleted`);

    // A role without the watch verb: the API refuses the watch, which says so at once.
    const refused = engine().create({ owner: "job-85-1", secret: "s".repeat(40) });
    await fake.untilWatches(3);
    fake.failNext({ method: "GET", status: 403 });
    fake.breakWatches();
    await expect(refused).rejects.toBeInstanceOf(VmRefused);
    await expect(refused).rejects.toThrow(/refused \(403\)/);
    expect(fake.pods.size).toBe(0);

    const late = engine(100).create({ owner: "job-83-1", secret: "s".repeat(40) });
    await expect(late).rejects.toBeInstanceOf(VmFailed);
    await expect(late).rejects.toThrow(/did not start/);
    expect(fake.pods.size).toBe(0);
    release();
    expect(fake.problems).toEqual([]);
  });
});
