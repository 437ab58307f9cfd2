import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { nodeVersionProblem } from "../../bin/node-version.js";

const root = new URL("../../", import.meta.url).pathname;
const engines: string = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).engines.node;
// Makes the started Node report an old version, as Node 20 would.
const asNode20 = `--import=data:text/javascript,${encodeURIComponent(
  'Object.defineProperty(process.versions,"node",{value:"20.20.2"});Object.defineProperty(process,"version",{value:"v20.20.2"})',
)}`;

function runOld(args: string[], cwd = root) {
  return spawnSync(process.execPath, [asNode20, ...args], {
    cwd,
    encoding: "utf8",
    env: { ...process.env, APP_ID: "", NODE_OPTIONS: "" },
    timeout: 60_000,
  });
}

describe("Node version check", () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("names the version needed for older Nodes only", () => {
    expect(nodeVersionProblem("20.20.2", ">=22.12")).toBe(
      "vmpilot: needs Node.js 22.12 or newer (24 LTS recommended); this is Node.js 20.20.2",
    );
    expect(nodeVersionProblem("22.11.0", ">=22.12")).toMatch(/needs Node.js 22.12/);
    expect(nodeVersionProblem("22.12.0", ">=22.12")).toBeUndefined();
    expect(nodeVersionProblem("24.1.0", ">=22.12")).toBeUndefined();
  });

  it("is the first thing `npm start` does: one line, exit 1", () => {
    const result = runOld(["bin/start.js"]);
    expect(result.status).toBe(1);
    expect(result.stderr.trim().split("\n")).toEqual([
      "vmpilot: needs Node.js 22.12 or newer (24 LTS recommended); this is Node.js 20.20.2",
    ]);
  });

  it("is the first thing the CLI does", () => {
    const result = runOld(["bin/vmpilot.js", "run", "--repo", ".", "task"]);
    expect(result.status).toBe(1);
    expect(result.stderr.trim()).toMatch(/^vmpilot: needs Node.js 22\.12 or newer/);
  });

  it("npm install refuses an unsupported Node (engine-strict)", () => {
    const dir = mkdtempSync(join(tmpdir(), "vmpilot-engines-"));
    dirs.push(dir);
    copyFileSync(join(root, ".npmrc"), join(dir, ".npmrc"));
    writeFileSync(
      join(dir, "package.json"),
      JSON.stringify({ name: "engines-probe", version: "1.0.0", engines: { node: engines } }),
    );
    // npm starts its own Node from PATH; NODE_OPTIONS makes that one report the old version.
    const result = spawnSync("npm", ["install", "--offline", "--no-audit", "--no-fund"], {
      cwd: dir,
      encoding: "utf8",
      env: { ...process.env, NODE_OPTIONS: asNode20 },
      timeout: 60_000,
    });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toMatch(/EBADENGINE|Unsupported engine|Not compatible with your version/);
  });
});
