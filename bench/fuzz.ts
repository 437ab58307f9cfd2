// The suite's fuzz properties (test/fuzz) at ten times their cases, from a fresh seed: what the
// suite's fixed seed has not tried yet. fast-check prints the seed with any counterexample, and
// FUZZ_SEED replays it.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const scale = process.env.FUZZ_SCALE ?? "10";
const seed = process.env.FUZZ_SEED ?? String(Math.floor(Math.random() * 2 ** 31));
console.log(`fuzz: ${scale}× the suite's cases, seed ${seed}`);
const result = spawnSync(process.execPath, ["node_modules/vitest/vitest.mjs", "run", "test/fuzz"], {
  cwd: root,
  stdio: "inherit",
  env: { ...process.env, FUZZ_SCALE: scale, FUZZ_SEED: seed },
});
process.exit(result.status ?? 1);
