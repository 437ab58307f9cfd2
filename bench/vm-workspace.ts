/**
 * A job's workspace on a VM, through the Fly Machines and Kubernetes API fakes whose machines run
 * the real workspace agent (in a local sandbox), for the 50,000-file repository:
 *   - in: VM made and started, the branch bundled from the worker's checkout, sent, checked out;
 *   - out: a commit in the VM and the bundle of new commits read back, as publishing does;
 *   - API calls to the engine per job (make, wait, destroy), without retries.
 * The floor is the same checkout straight from the bundle on this machine, with no VM, agent or
 * sandbox, measured in the same run: this machine's disk speed varies a lot from hour to hour.
 * Goals: in + out at most 2 s (median); at most 6 API calls per job.
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { createWorkspace } from "../src/workspace/factory.ts";
import type { VmEngine } from "../src/workspace/vm/engine.ts";
import { createFlyEngine } from "../src/workspace/vm/fly.ts";
import { createKubernetesEngine } from "../src/workspace/vm/kubernetes.ts";
import type { EngineFake } from "../test/helpers/engine-fake.ts";
import { FLY_APP, startFlyFake } from "../test/helpers/fly-fake.ts";
import { NAMESPACE, startKubernetesFake } from "../test/helpers/kubernetes-fake.ts";
import { FILES, generateRepo } from "./lib/big-repo.ts";

const RUNS = 3;
const GOAL_MS = 2000;
const GOAL_CALLS = 6;

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

const engines: Array<[string, () => Promise<EngineFake>, (fake: EngineFake) => VmEngine]> = [
  [
    "fly",
    startFlyFake,
    (fake) =>
      createFlyEngine({
        token: fake.token,
        app: FLY_APP,
        image: fake.image,
        cpus: 2,
        memoryMb: 4096,
        port: fake.vms.port,
        apiUrl: fake.url,
      }),
  ],
  [
    "kubernetes",
    startKubernetesFake,
    (fake) => {
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromString((fake as unknown as { kubeconfig: string }).kubeconfig);
      return createKubernetesEngine({
        namespace: NAMESPACE,
        image: fake.image,
        cpu: "2",
        memory: "4Gi",
        port: fake.vms.port,
        deadlineSeconds: 3600,
        kubeConfig,
      });
    },
  ],
];

async function main() {
  const dir = await mkdtemp(join(tmpdir(), "vmpilot-bench-vm-"));
  try {
    const source = join(dir, "source.git");
    generateRepo(source);
    const local = join(dir, "checkout");
    execFileSync("git", ["clone", "-q", "--shared", source, local]);
    execFileSync("git", ["-C", local, "checkout", "-q", "-b", "vmpilot/bench"]);
    const base = execFileSync("git", ["-C", local, "rev-parse", "HEAD"], {
      encoding: "utf8",
    }).trim();
    const floors: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const bundle = join(dir, "floor.bundle");
      const target = join(dir, `floor-${run}`);
      const t0 = performance.now();
      execFileSync("git", [
        "-C",
        local,
        "bundle",
        "create",
        "-q",
        bundle,
        "refs/heads/vmpilot/bench",
      ]);
      execFileSync("git", ["init", "-q", "-b", "vmpilot/bench", target]);
      const ref = "+refs/heads/vmpilot/bench:refs/heads/vmpilot/bench";
      execFileSync("git", ["-C", target, "fetch", "-q", "--update-head-ok", bundle, ref]);
      execFileSync("git", ["-C", target, "reset", "-q", "--hard", "vmpilot/bench"]);
      floors.push(performance.now() - t0);
      await rm(target, { recursive: true, force: true });
    }
    const floor = median(floors);
    console.log(`repository: ${FILES} files; median of ${RUNS} jobs per engine`);
    console.log(`floor (bundle + checkout on this machine, no VM) ${floor.toFixed(0)} ms`);
    for (const [name, start, make] of engines) {
      const fake = await start();
      const ins: number[] = [];
      const outs: number[] = [];
      const calls: number[] = [];
      try {
        for (let run = 0; run < RUNS; run++) {
          fake.calls.length = 0;
          const t0 = performance.now();
          const workspace = await createWorkspace({
            provider: name as "fly" | "kubernetes",
            root: local,
            engine: make(fake),
            owner: `job-${run + 1}-1`,
          });
          const t1 = performance.now();
          const made = await workspace.exec(
            `echo change > CHANGES.md && git add -A && git -c user.name=b -c user.email=b@example.com commit -qm change && git bundle create -q .git/out.bundle HEAD ^${base}`,
          );
          if (made.exitCode !== 0) throw new Error(made.stderr);
          const bundle = await workspace.readFile(".git/out.bundle", 100_000_000);
          const t2 = performance.now();
          await workspace.dispose();
          if (bundle.length === 0) throw new Error("empty bundle");
          ins.push(t1 - t0);
          outs.push(t2 - t1);
          calls.push(fake.calls.length);
        }
      } finally {
        await fake.close();
      }
      const total = median(ins) + median(outs);
      console.log(
        `${name.padEnd(10)} in ${median(ins).toFixed(0)} ms (${(median(ins) / floor).toFixed(1)}x the floor), out ${median(outs).toFixed(0)} ms, in+out ${total.toFixed(0)} ms (goal <= ${GOAL_MS}: ${total <= GOAL_MS ? "met" : "missed"}); API calls per job ${median(calls)} (goal <= ${GOAL_CALLS}: ${median(calls) <= GOAL_CALLS ? "met" : "missed"})`,
      );
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
