/**
 * What an MCP server costs a job, in the default workspace (the workspace agent in one sandbox
 * per job): nothing for a job that calls none of its tools (it offers a tool that would start it,
 * and no process runs), and its start once for a job that does: the first call starts the server,
 * says MCP's hello, lists its tools and calls one; every later call is one round trip. Printed
 * for a plain Node server of the repository's (test/helpers/hostile-mcp.mjs) and for the
 * registry's server-everything: the first call's and a later call's wall time (median of 10), the
 * worker's CPU for the first one, and the server's own CPU for its start (from /proc).
 */
import { execFileSync } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { McpTools } from "../src/agent/mcp/open.ts";
import type { McpServerSetting } from "../src/config/mcp.ts";
import { createLocalAgentWorkspace } from "../src/workspace/agent/local.ts";

const RUNS = 10;
const PROJECT = fileURLToPath(new URL("..", import.meta.url));
const TICKS = Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim()) || 100;

/** CPU seconds of the live processes whose command line holds `token`, children included. */
async function cpuOf(token: string): Promise<number> {
  let seconds = 0;
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    if (!cmdline.includes(token)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const [utime, stime] = fields.slice(11, 13).map(Number) as [number, number];
    seconds += (utime + stime) / TICKS;
  }
  return seconds;
}

const median = (values: number[]) =>
  values.toSorted((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

const root = await mkdtemp(join(tmpdir(), "vmpilot-bench-mcp-"));
await mkdir(join(root, "tools"));
await copyFile(join(PROJECT, "test/helpers/hostile-mcp.mjs"), join(root, "tools", "mcp.mjs"));
const workspace = await createLocalAgentWorkspace(root, {
  logger: pino({ level: "silent" }),
  readOnlyPaths: [join(PROJECT, "node_modules")],
});
const everything = join(
  PROJECT,
  "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
);
const servers: [string, McpServerSetting, string, Record<string, unknown>][] = [
  [
    "plain Node server",
    { command: ["node", "tools/mcp.mjs"], from: "file" },
    "tools/mcp.mjs",
    { text: "hi" },
  ],
  [
    "server-everything",
    { command: ["node", everything, "stdio"], from: "file" },
    everything,
    { message: "hi" },
  ],
];

try {
  // A job that calls no MCP tool: the tools it is offered, and no server process.
  const idle = new McpTools({
    servers: { docs: servers[0]?.[1] as McpServerSetting },
    workspace,
    secrets: [],
    egress: { policy: { protocols: [], refuseAddress: () => undefined }, allowHosts: [] },
  });
  const offered = performance.now();
  const names = (await idle.offered()).map((tool) => tool.name);
  const idleMs = performance.now() - offered;
  const running = await cpuOf("tools/mcp.mjs");
  console.log(
    `no MCP tool called: offered ${names.join(", ")} in ${idleMs.toFixed(2)} ms; server processes: ${running === 0 ? "none" : "some"}`,
  );
  await idle.close();

  for (const [label, setting, token, input] of servers) {
    const first: number[] = [];
    const later: number[] = [];
    const workerCpu: number[] = [];
    const serverCpu: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const tools = new McpTools({
        servers: { s: setting },
        workspace,
        secrets: [],
        egress: { policy: { protocols: [], refuseAddress: () => undefined }, allowHosts: [] },
      });
      const cpu = process.cpuUsage();
      const started = performance.now();
      const answer = await tools.find("mcp__s__echo")?.run(input, { remainingMs: 60_000 });
      first.push(performance.now() - started);
      const used = process.cpuUsage(cpu);
      workerCpu.push((used.user + used.system) / 1000);
      if (answer?.isError !== false) throw new Error(`${label}: ${answer?.content}`);
      serverCpu.push((await cpuOf(token)) * 1000);
      const again = performance.now();
      await tools.find("mcp__s__echo")?.run(input, { remainingMs: 60_000 });
      later.push(performance.now() - again);
      await tools.close();
    }
    console.log(
      `${label.padEnd(18)} first call (start, hello, list, call) median ${median(first).toFixed(0)} ms, ` +
        `worker CPU ${median(workerCpu).toFixed(0)} ms, server CPU ${median(serverCpu).toFixed(0)} ms; ` +
        `a later call median ${median(later).toFixed(1)} ms`,
    );
  }
} finally {
  await workspace.dispose();
  await rm(root, { recursive: true, force: true });
}
