// Runs a TypeScript entry without a build step. Node 22.18+ and 24 strip the types themselves;
// older Nodes load tsx for it. The compile cache keeps V8's code (and Node's stripped TypeScript)
// between starts, which roughly halves the CPU a start costs: every CLI command, every server.
import { enableCompileCache } from "node:module";
import { requireSupportedNode } from "./node-version.js";

export async function runTypeScript(entry) {
  requireSupportedNode();
  enableCompileCache?.();
  if (!process.features.typescript) {
    const { register } = await import("tsx/esm/api");
    register();
  }
  return import(entry);
}
