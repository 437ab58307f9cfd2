/**
 * Sandboxed exec overhead: 200 runs of `true` against a raw spawn of `true` in the same run, for
 * the host workspace, the sandbox per command (`sandbox`, and with the network proxy bridge), the
 * workspace agent in one sandbox per job (the default: sandbox isolation on the local engine;
 * over its unix socket, each command in a light sandbox of its own started ahead), and the same
 * agent as a Fly Machine's, reached over TCP on loopback through the Fly API fake.
 * The agent keeps a shell (and its sandbox) started ahead for the next command
 * (agent/warm-shell.ts), started once a command ends: back to back, each command still waits for
 * that start; paced as a model sends commands (here 20 ms apart; a model's turn takes seconds),
 * none does. Both are printed.
 * Goal: the default workspace's median (paced) at most 1 ms above the raw spawn's, printed also as
 * a ratio to it; machine load (others' tests) moves every figure, the ratio least.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { createLocalAgentWorkspace } from "../src/workspace/agent/local.ts";
import { createWorkspace } from "../src/workspace/factory.ts";
import { createHostWorkspace } from "../src/workspace/sandbox/host.ts";
import { createSandboxWorkspace } from "../src/workspace/sandbox/sandbox.ts";
import type { Workspace } from "../src/workspace/types.ts";
import { flyEngine, startFlyFake } from "../test/helpers/fly-fake.ts";

const RUNS = 200;
const GOAL_EXTRA_MS = 1;
const PACE_MS = 20;
const quiet = pino({ level: "silent" });

function rawSpawn(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("true", [], { stdio: ["ignore", "pipe", "pipe"] });
    child.on("error", reject);
    child.on("close", () => resolve());
  });
}

async function measure(runs: number, task: () => Promise<unknown>, paceMs = 0): Promise<number[]> {
  for (let i = 0; i < 5; i++) await task();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    if (paceMs) await sleep(paceMs);
    const start = performance.now();
    await task();
    times.push(performance.now() - start);
  }
  return times.sort((a, b) => a - b);
}

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
const fmt = (ms: number) => `${ms.toFixed(2)} ms`;

function report(name: string, sorted: number[]): void {
  console.log(`${name.padEnd(44)} median ${fmt(pct(sorted, 50))}  p90 ${fmt(pct(sorted, 90))}`);
}

async function execTrue(workspace: Workspace): Promise<void> {
  const result = await workspace.exec("true");
  if (result.exitCode !== 0) throw new Error(`true failed: ${result.stderr}`);
}

const root = await mkdtemp(join(tmpdir(), "vmpilot-bench-exec-"));
const host = createHostWorkspace(root, { logger: quiet });
const sandbox = await createSandboxWorkspace(root, { logger: quiet });
const networked = await createSandboxWorkspace(root, {
  logger: quiet,
  allowHosts: ["registry.npmjs.org"],
});
const agent = await createLocalAgentWorkspace(root, { logger: quiet });
const fly = await startFlyFake();
const checkout = await mkdtemp(join(tmpdir(), "vmpilot-bench-exec-vm-"));
execFileSync("git", ["init", "-q", "-b", "main", checkout]);
const machine = await createWorkspace({
  isolation: "vm",
  engine: "fly",
  root: checkout,
  vmEngine: flyEngine(fly),
  owner: "job-1-1",
});
try {
  const raw = await measure(RUNS, rawSpawn);
  const hostTimes = await measure(RUNS, () => execTrue(host));
  const sandboxTimes = await measure(RUNS, () => execTrue(sandbox));
  const networkedTimes = await measure(RUNS / 4, () => execTrue(networked));
  const agentBackToBack = await measure(RUNS, () => execTrue(agent));
  const agentTimes = await measure(RUNS, () => execTrue(agent), PACE_MS);
  const machineTimes = await measure(RUNS, () => execTrue(machine), PACE_MS);
  console.log(`${RUNS} runs of \`true\`, load ${loadavg()[0]?.toFixed(1)} at the start`);
  const rawMedian = pct(raw, 50);
  const line = (name: string, sorted: number[]) =>
    report(`${name} (${(pct(sorted, 50) / rawMedian).toFixed(2)}× raw)`, sorted);
  report("raw spawn", raw);
  line("host workspace (bash -c)", hostTimes);
  line("sandbox per command", sandboxTimes);
  line(`sandbox + proxy bridge (${RUNS / 4})`, networkedTimes);
  line("agent, back to back", agentBackToBack);
  line(`agent, paced (${PACE_MS} ms apart)`, agentTimes);
  line("agent on a Fly Machine, paced", machineTimes);
  const extra = (sorted: number[]) => pct(sorted, 50) - rawMedian;
  const signed = (ms: number) => `${ms < 0 ? "−" : "+"}${fmt(Math.abs(ms))}`;
  const agentExtra = extra(agentTimes);
  console.log(
    `default workspace (the agent, paced) over a raw spawn: median ${signed(agentExtra)}, ${(pct(agentTimes, 50) / rawMedian).toFixed(2)}× (goal ≤ +${GOAL_EXTRA_MS} ms: ${agentExtra <= GOAL_EXTRA_MS ? "met" : "missed"}); sandbox per command ${signed(extra(sandboxTimes))}, ${(pct(sandboxTimes, 50) / rawMedian).toFixed(2)}×`,
  );
} finally {
  await Promise.all([host.dispose(), sandbox.dispose(), networked.dispose(), agent.dispose()]);
  await machine.dispose();
  await fly.close();
  await rm(checkout, { recursive: true, force: true });
  await rm(root, { recursive: true, force: true });
}
