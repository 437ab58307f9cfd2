// Starts test/e2e/worker-process.ts (the real startServer) in a process of its own; resolves once
// it takes jobs, with the URL it listens on.
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { TYPESCRIPT_FLAGS } from "./typescript.ts";

export function spawnServerProcess(
  options: Record<string, unknown>,
): Promise<{ process: ChildProcess; url: string }> {
  const script = fileURLToPath(new URL("../e2e/worker-process.ts", import.meta.url));
  const child = spawn(process.execPath, [...TYPESCRIPT_FLAGS, script], {
    env: { ...process.env, VMPILOT_TEST_WORKER: JSON.stringify(options) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const role = String(options.role ?? "worker");
  return new Promise((resolve, reject) => {
    let url = "";
    child.once("exit", (code) => reject(new Error(`the ${role} process exited (${code})`)));
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      if (line.startsWith("url ")) url = line.slice(4);
      if (line === "ready") resolve({ process: child, url });
    });
  });
}
