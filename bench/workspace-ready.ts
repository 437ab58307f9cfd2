/**
 * Workspace ready from a warm mirror against a cold `git clone`, on a generated repository of
 * 50,000 small files served over file:// (git's pack protocol, as over the network).
 * Warm = refresh the mirror (fetch), shared clone with checkout, new branch.
 * Goal: at least 10x faster than the cold clone, and at most 1.5 s.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { prepareCheckout } from "../src/workspace/checkout.ts";

const FILES = 50_000;
const PER_DIR = 100;
const RUNS = 3;
const GOAL_RATIO = 10;
const GOAL_WARM_MS = 1500;

/** Builds the repository with fast-import: no working tree is written to make it. */
function generateRepo(path: string): void {
  execFileSync("git", ["init", "-q", "--bare", "-b", "main", path]);
  const lines: string[] = [];
  for (let i = 0; i < FILES; i++) {
    const body = `export const value${i} = ${i};\n`;
    lines.push("blob", `mark :${i + 1}`, `data ${Buffer.byteLength(body)}`, body);
  }
  const message = "generated\n";
  lines.push(
    "commit refs/heads/main",
    "committer Bench <bench@example.com> 1700000000 +0000",
    `data ${message.length}`,
    message,
  );
  for (let i = 0; i < FILES; i++) {
    const dir = String(Math.floor(i / PER_DIR)).padStart(3, "0");
    lines.push(`M 100644 :${i + 1} src/d${dir}/file${i}.ts`);
  }
  const input = `${lines.join("\n")}\n`;
  const result = spawnSync("git", ["fast-import", "--quiet"], { cwd: path, input });
  if (result.status !== 0) throw new Error(`fast-import failed: ${result.stderr}`);
  execFileSync("git", ["repack", "-adq"], { cwd: path });
}

async function timed(task: () => Promise<unknown> | unknown): Promise<number> {
  const start = performance.now();
  await task();
  return performance.now() - start;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

const base = await mkdtemp(join(tmpdir(), "vmpilot-bench-ready-"));
try {
  const source = join(base, "source.git");
  const generation = await timed(() => generateRepo(source));
  const url = `file://${source}`;
  console.log(`generated ${FILES} files in ${(generation / 1000).toFixed(1)} s`);

  const cold: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const dest = join(base, `cold-${i}`);
    cold.push(await timed(() => execFileSync("git", ["clone", "-q", url, dest])));
    await rm(dest, { recursive: true, force: true });
  }

  const dataDir = join(base, "data");
  const first = await timed(() =>
    prepareCheckout({ dataDir, repo: url, dest: join(base, "first"), branch: "warmup" }),
  );
  const warm: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    warm.push(
      await timed(() =>
        prepareCheckout({ dataDir, repo: url, dest: join(base, `warm-${i}`), branch: `job-${i}` }),
      ),
    );
  }

  const coldMs = median(cold);
  const warmMs = median(warm);
  const ratio = coldMs / warmMs;
  console.log(`cold git clone (median of ${RUNS})        ${coldMs.toFixed(0)} ms`);
  console.log(`first checkout (creates the mirror)       ${first.toFixed(0)} ms`);
  console.log(`warm mirror → ready (median of ${RUNS})   ${warmMs.toFixed(0)} ms`);
  console.log(
    `ratio ${ratio.toFixed(1)}x (goal ≥ ${GOAL_RATIO}x: ${ratio >= GOAL_RATIO ? "met" : "missed"}); ` +
      `warm ${warmMs.toFixed(0)} ms (goal ≤ ${GOAL_WARM_MS} ms: ${warmMs <= GOAL_WARM_MS ? "met" : "missed"})`,
  );
} finally {
  await rm(base, { recursive: true, force: true });
}
