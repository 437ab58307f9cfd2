// The MCP servers the tests run: the registry's server-everything (over stdio, or over streamable
// HTTP as a process of its own on loopback) and a hostile one of ours (hostile-mcp.mjs).
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const EVERYTHING = fileURLToPath(
  new URL(
    "../../node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    import.meta.url,
  ),
);
export const HOSTILE = fileURLToPath(new URL("./hostile-mcp.mjs", import.meta.url));

/** A free loopback port: one the kernel hands out, then let go. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** server-everything over streamable HTTP; resolves once it listens. */
export async function startEverythingHttp(): Promise<{ port: number; close(): void }> {
  const port = await freePort();
  const server = spawn(process.execPath, [EVERYTHING, "streamableHttp"], {
    env: { PATH: process.env.PATH, PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    server.once("exit", (code) => reject(new Error(`server-everything exited (${code})`)));
    createInterface({ input: server.stderr as NodeJS.ReadableStream }).on("line", (line) => {
      if (line.includes("listening on port")) resolve();
    });
  });
  return { port, close: () => server.kill() };
}
