// The tree is shaped like the data flow: a webhook or a chat request comes in at the top (intake,
// chat, web, cli), becomes a job (jobs), runs in a workspace with the model (agent, workspace) and
// talks to GitHub (github), over the store and the config; shared code (logging, redaction, HTTP
// bodies) is at the bottom. An import may go down or sideways within its folder, never up.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../src", import.meta.url));

/** Lowest first; folders on one line may import each other. */
const LAYERS: readonly (readonly string[])[] = [
  ["errors.ts", "log", "http"],
  ["metrics.ts", "config", "store"],
  ["github", "workspace"],
  ["agent"],
  ["jobs"],
  ["intake", "chat", "web", "cli"],
  // main.ts's web and worker roles, which put the faces and the jobs together.
  ["roles"],
  ["main.ts", "health.ts", "node-version.ts"],
];

function layerOf(top: string): number {
  const index = LAYERS.findIndex((layer) => layer.includes(top));
  if (index < 0) throw new Error(`src/${top} is in no layer: add it to LAYERS`);
  return index;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+"(\.[^"]+)"|import\("(\.[^"]+)"\)/g;

function imports(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(IMPORT)].map((m) => resolve(dirname(file), m[1] ?? m[2] ?? ""));
}

const top = (path: string) => relative(SRC, path).split("/")[0] ?? "";

describe("the layers of src/", () => {
  it("import only their own layer or lower ones", () => {
    const upward = sources(SRC).flatMap((file) =>
      imports(file)
        .filter((target) => layerOf(top(target)) > layerOf(top(file)))
        .map((target) => `${relative(SRC, file)} → ${relative(SRC, target)}`),
    );
    expect(upward).toEqual([]);
  });

  it("knows every file and folder of src/", () => {
    for (const entry of readdirSync(SRC)) expect(() => layerOf(entry)).not.toThrow();
  });
});
