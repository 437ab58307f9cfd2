import { fork } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Logger, silentLogger } from "../log/logger.ts";
import { DataDirBusyError } from "./data-dir-lock.ts";

export interface EmbeddedPostgres {
  url: string;
  /** The database process, whose memory is PGlite's. */
  pid: number;
  stop(): Promise<void>;
}

/** What the database process sends once: where it serves, or why it could not start. */
export type EmbeddedReport = { url: string } | { error: string; busyHolder?: number };

const ENTRY = fileURLToPath(new URL("./embedded-process.ts", import.meta.url));
const EXEC_ARGV = [
  // The entry and its imports are erasable TypeScript, which Node runs without tsx: tsx would add
  // some 150 ms and 25 MB to the start. Node 22 before 22.18 strips types only when asked.
  ...(process.features.typescript
    ? []
    : ["--experimental-strip-types", "--disable-warning=ExperimentalWarning"]),
  // Liftoff, V8's baseline WebAssembly compiler, only: TurboFan needs some 600 MB at once to
  // optimise the largest of PGlite's hot functions. Queries take about 2.5 times as long, which
  // the app's few small ones afford.
  "--no-wasm-tier-up",
  "--no-wasm-dynamic-tiering",
];

function describeExit(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `signal ${signal}` : `code ${code}`;
}

/**
 * Starts PGlite (file-backed under dataDir/pglite, or in memory when dataDir is "memory://") in a
 * process of its own, served on a Unix socket only this user can reach (no TCP port: PGlite
 * checks no password), so the rest of the code talks to it with plain `pg`. The process stops when asked or when this one exits, however it dies.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  logger: Logger = silentLogger,
): Promise<EmbeddedPostgres> {
  if (dataDir !== "memory://" && !existsSync(join(dataDir, "pglite", "PG_VERSION"))) {
    // Creating the database (initdb) leaves some 400 MB in the WASM memory of the process that
    // did it, for good: a process of its own does it, and the serving one starts small.
    await startProcess(dataDir, ["--create"]).then(({ exited }) => exited);
  }
  const { child, report, exited } = await startProcess(dataDir, []);
  let stopping: Promise<void> | undefined;
  exited.then(({ code, signal }) => {
    if (!stopping) {
      logger.error(
        { dataDir, pid: child.pid, exit: describeExit(code, signal) },
        "embedded database process exited; database queries fail until vmpilot restarts",
      );
    }
  });
  return {
    url: report.url,
    pid: child.pid as number,
    stop() {
      stopping ??= (async () => {
        if (child.connected) child.send("stop", () => {});
        const { code, signal } = await exited;
        if (code !== 0) {
          throw new Error(`the embedded database process exited (${describeExit(code, signal)})`);
        }
      })();
      return stopping;
    },
  };
}

async function startProcess(dataDir: string, args: string[]) {
  // Its own flags, not this process's: the app runs under tsx, vitest or bin/vmpilot.js.
  const child = fork(ENTRY, [dataDir, ...args], { execArgv: EXEC_ARGV });
  // After the exit and the last message: a report sent just before exiting is never missed.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("close", (code, signal) => resolve({ code, signal })),
  );
  const report = await new Promise<EmbeddedReport>((resolve, reject) => {
    child.once("message", (message) => resolve(message as EmbeddedReport));
    child.once("error", reject);
    exited.then(({ code, signal }) =>
      reject(
        new Error(
          `the embedded database process exited (${describeExit(code, signal)}) before it started`,
        ),
      ),
    );
  });
  if ("error" in report) {
    await exited;
    if (report.busyHolder) throw new DataDirBusyError(dataDir, report.busyHolder);
    throw new Error(report.error);
  }
  return { child, report, exited };
}
