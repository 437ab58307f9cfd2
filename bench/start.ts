/**
 * What a start costs: `vmpilot --help` (the CLI's whole module graph, nothing run), 15 times each
 * way, as CPU seconds of the started process against `node -e 0` in the same run:
 * - through tsx, as before bin/typescript.js;
 * - Node stripping the types itself, without a compile cache;
 * - bin/vmpilot.js: Node stripping the types, with the compile cache (warmed by the first run).
 * Every server (`npm start`), CLI command and test process starts the same way.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { reapedCpu } from "./lib/process-usage.ts";

const RUNS = 15;
const root = fileURLToPath(new URL("..", import.meta.url));
const cache = mkdtempSync(join(tmpdir(), "vmpilot-bench-cache-"));
const noCache = { ...process.env, NODE_COMPILE_CACHE: "", NODE_DISABLE_COMPILE_CACHE: "1" };

/** Mean CPU seconds and median wall milliseconds of `args`, after one unmeasured run. */
function measure(args: string[], env: NodeJS.ProcessEnv) {
  const run = () => {
    const result = spawnSync(process.execPath, args, { cwd: root, env, stdio: "ignore" });
    // --help prints the usage and exits 2, as any usage does.
    if (result.status !== 0 && result.status !== 2)
      throw new Error(`${args.join(" ")} exited ${result.status}`);
  };
  run();
  const walls: number[] = [];
  const before = reapedCpu(process.pid);
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    run();
    walls.push(performance.now() - start);
  }
  walls.sort((a, b) => a - b);
  return { cpu: (reapedCpu(process.pid) - before) / RUNS, wall: walls[Math.floor(RUNS / 2)] ?? 0 };
}

const ways = [
  ["node -e 0 (baseline)", ["-e", "0"], noCache],
  ["tsx", ["--import", "tsx", "src/cli/main.ts", "--help"], noCache],
  ["native, no cache", ["src/cli/main.ts", "--help"], noCache],
  [
    "bin/vmpilot.js (native + cache)",
    ["bin/vmpilot.js", "--help"],
    { ...process.env, NODE_COMPILE_CACHE: cache },
  ],
] as const;

try {
  const results = ways.map(([name, args, env]) => ({ name, ...measure([...args], env) }));
  const baseline = results[0]?.cpu ?? 1;
  const tsx = results[1]?.cpu ?? 1;
  console.log(`vmpilot --help, ${RUNS} runs each (CPU: mean of the started process; wall: median)`);
  for (const { name, cpu, wall } of results) {
    console.log(
      `  ${name.padEnd(34)} ${cpu.toFixed(3)} core-s  ${wall.toFixed(0).padStart(5)} ms wall  ` +
        `${(cpu / baseline).toFixed(1)}× node -e 0, ${(cpu / tsx).toFixed(2)}× tsx`,
    );
  }
} finally {
  rmSync(cache, { recursive: true, force: true });
}
