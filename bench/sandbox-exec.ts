/**
 * Sandboxed exec overhead: 200 runs of `true` through the sandbox workspace against a raw spawn of
 * `true`, plus the host workspace and a sandbox with the network proxy bridge for context, and the
 * workspace agent (in a local sandbox, over its unix socket), and the same agent as a Fly Machine's,
 * reached over TCP on loopback through the Fly API fake.
 * The agent keeps a shell started ahead for the next command (agent/warm-shell.ts), started once
 * a command ends: back to back, each command still waits for that start; paced as a model sends
 * commands (here 20 ms apart; a model's turn takes seconds), none does. Both are printed.
 * Goals: the sandbox's median at most 10 ms above the raw spawn's; the agent's (paced) at most 3 ms.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
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
const GOAL_EXTRA_MS = 10;
const GOAL_AGENT_MS = 3;
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
  console.log(`${name.padEnd(30)} median ${fmt(pct(sorted, 50))}  p90 ${fmt(pct(sorted, 90))}`);
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
  provider: "fly",
  root: checkout,
  engine: flyEngine(fly),
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
  console.log(`${RUNS} runs of \`true\``);
  report("raw spawn", raw);
  report("host workspace (bash -c)", hostTimes);
  report("sandbox workspace", sandboxTimes);
  report(`sandbox + proxy bridge (${RUNS / 4})`, networkedTimes);
  report("agent, back to back", agentBackToBack);
  report(`agent, paced (${PACE_MS} ms apart)`, agentTimes);
  report("agent on a Fly Machine, paced", machineTimes);
  const extra = pct(sandboxTimes, 50) - pct(raw, 50);
  const extraP90 = pct(sandboxTimes, 90) - pct(raw, 90);
  console.log(
    `sandbox extra: median ${fmt(extra)}, p90 ${fmt(extraP90)} (goal ≤ ${GOAL_EXTRA_MS} ms: ${extra <= GOAL_EXTRA_MS ? "met" : "missed"})`,
  );
  const agentMedian = pct(agentTimes, 50);
  console.log(
    `workspace agent, paced: median ${fmt(agentMedian)} (goal ≤ ${GOAL_AGENT_MS} ms: ${agentMedian <= GOAL_AGENT_MS ? "met" : "missed"}); ${(pct(sandboxTimes, 50) / agentMedian).toFixed(1)}× faster than the sandbox, ${(pct(raw, 50) / agentMedian).toFixed(1)}× faster than a raw spawn of \`true\` on this machine`,
  );
  const machineMedian = pct(machineTimes, 50);
  console.log(
    `agent over TCP loopback, paced: median ${fmt(machineMedian)} (goal ≤ ${GOAL_AGENT_MS} ms: ${machineMedian <= GOAL_AGENT_MS ? "met" : "missed"})`,
  );
} finally {
  await Promise.all([host.dispose(), sandbox.dispose(), networked.dispose(), agent.dispose()]);
  await machine.dispose();
  await fly.close();
  await rm(checkout, { recursive: true, force: true });
  await rm(root, { recursive: true, force: true });
}
