// Runs every benchmark in this folder, one after the other, so their figures come from one run.
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dir = fileURLToPath(new URL(".", import.meta.url));
const only = process.argv.slice(2);
const scripts = readdirSync(dir)
  .filter((name) => name.endsWith(".ts") && name !== "index.ts")
  .filter((name) => only.length === 0 || only.some((o) => name.includes(o)))
  .sort();

let failed = 0;
for (const script of scripts) {
  console.log(`\n## ${script}`);
  const result = spawnSync(process.execPath, ["--import", "tsx", `${dir}${script}`], {
    stdio: "inherit",
  });
  if (result.status !== 0) failed++;
}
process.exit(failed === 0 ? 0 : 1);
