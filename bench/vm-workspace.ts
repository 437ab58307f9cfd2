/**
 * A job's workspace on a VM, through the Fly Machines and Kubernetes API fakes whose machines run
 * the real workspace agent (in a local sandbox), for the 50,000-file repository:
 *   - boot: the VM made and its agent answering (what a warm pool takes off a job's path);
 *   - in: the branch bundled from the worker's checkout, sent to the started VM, checked out;
 *   - out: a commit in the VM and the bundle of new commits read back, as publishing does;
 *   - API calls to the engine per job (make, wait, destroy), without retries.
 * The floor is the same checkout straight from the bundle on this machine, with no VM, agent or
 * sandbox, measured in the same run: writing 50,000 files is most of it, and this machine's disk
 * speed varies several-fold from hour to hour. So everything runs twice: on the disk, and with
 * every directory (worker's and VM's) in memory (/dev/shm), where the disk is out of the figure.
 * Goals: in + out at most 2 s (median); at most 6 API calls per job.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { waitForAgent } from "../src/workspace/agent/remote.ts";
import { createWorkspace } from "../src/workspace/factory.ts";
import type { VmEngine } from "../src/workspace/vm/engine.ts";
import { createKubernetesEngine } from "../src/workspace/vm/kubernetes.ts";
import type { VmPool } from "../src/workspace/vm/pool.ts";
import type { EngineFake } from "../test/helpers/engine-fake.ts";
import { flyEngine, startFlyFake } from "../test/helpers/fly-fake.ts";
import { NAMESPACE, startKubernetesFake } from "../test/helpers/kubernetes-fake.ts";
import { FILES, generateRepo } from "./lib/big-repo.ts";

const RUNS = 3;
const GOAL_MS = 2000;
const GOAL_CALLS = 6;

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

const engines: Array<[string, () => Promise<EngineFake>, (fake: EngineFake) => VmEngine]> = [
  ["fly", startFlyFake, (fake) => flyEngine(fake, { cpus: 2, memoryMb: 4096 })],
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

/** One VM made ahead and handed to the next workspace, as a warm pool of one would. */
async function bootOne(engine: VmEngine, owner: string): Promise<VmPool> {
  const secret = randomBytes(32).toString("base64url");
  const vm = await engine.create({ owner, secret });
  await waitForAgent({ baseUrl: vm.baseUrl }, 60_000);
  let started: { vm: typeof vm; secret: string } | undefined = { vm, secret };
  return {
    engine: engine.name,
    take() {
      const taken = started;
      started = undefined;
      return taken;
    },
    filled: async () => undefined,
    refresh: async () => undefined,
    close: async () => undefined,
  };
}

/** Waits for the disk to write back what earlier runs left, so that no run pays for another's. */
function settle(): void {
  execFileSync("sync");
}

function floorOf(dir: string, local: string): number {
  const floors: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const bundle = join(dir, "floor.bundle");
    const target = join(dir, `floor-${run}`);
    settle();
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
    rmSync(target, { recursive: true, force: true });
  }
  return median(floors);
}

async function pass(where: string): Promise<void> {
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
    const floor = floorOf(dir, local);
    console.log(`${where}: floor (bundle + checkout, no VM) ${floor.toFixed(0)} ms`);
    for (const [name, start, make] of engines) {
      const fake = await start();
      const boots: number[] = [];
      const ins: number[] = [];
      const outs: number[] = [];
      const calls: number[] = [];
      try {
        for (let run = 0; run < RUNS; run++) {
          fake.calls.length = 0;
          const engine = make(fake);
          const t0 = performance.now();
          const pool = await bootOne(engine, `job-${run + 1}-1`);
          settle();
          const t1 = performance.now();
          const workspace = await createWorkspace({
            isolation: "vm",
            engine: name as "fly" | "kubernetes",
            root: local,
            vmEngine: engine,
            pool,
            owner: `job-${run + 1}-1`,
          });
          const t2 = performance.now();
          const made = await workspace.exec(
            `echo change > CHANGES.md && git add -A && git -c user.name=b -c user.email=b@example.com commit -qm change && git bundle create -q .git/out.bundle HEAD ^${base}`,
          );
          if (made.exitCode !== 0) throw new Error(made.stderr);
          const bundle = await workspace.readFile(".git/out.bundle", 100_000_000);
          const t3 = performance.now();
          await workspace.dispose();
          if (bundle.length === 0) throw new Error("empty bundle");
          boots.push(t1 - t0);
          ins.push(t2 - t1);
          outs.push(t3 - t2);
          calls.push(fake.calls.length);
        }
      } finally {
        await fake.close();
      }
      const total = median(ins) + median(outs);
      console.log(
        `  ${name.padEnd(10)} boot ${median(boots).toFixed(0)} ms; in ${median(ins).toFixed(0)} ms (${(median(ins) / floor).toFixed(1)}x the floor), out ${median(outs).toFixed(0)} ms, in+out ${total.toFixed(0)} ms (goal <= ${GOAL_MS}: ${total <= GOAL_MS ? "met" : "missed"}); API calls per job ${median(calls)} (goal <= ${GOAL_CALLS}: ${median(calls) <= GOAL_CALLS ? "met" : "missed"})`,
      );
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

console.log(`repository: ${FILES} files; median of ${RUNS} jobs per engine`);
await pass("on disk");
const disk = process.env.TMPDIR;
process.env.TMPDIR = "/dev/shm";
try {
  await pass("in memory (/dev/shm)");
} finally {
  if (disk === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = disk;
}
