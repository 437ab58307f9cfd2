import { homedir } from "node:os";
import { resolve } from "node:path";
import { fallbackLogger, type Logger } from "../../log/logger.ts";
import { fileOps } from "../files.ts";
import { resolveInside } from "../paths.ts";
import { baseEnv, withExtraEnv } from "../process/env.ts";
import { launch } from "../process/launcher.ts";
import { programPath } from "../process/program.ts";
import { runProcess } from "../process/run.ts";
import { spawnedProcess } from "../process/spawned.ts";
import type { Workspace } from "../types.ts";

export interface HostWorkspaceOptions {
  logger?: Logger;
}

/**
 * Runs commands directly on the worker, with no isolation — for trusted local use only, so it is
 * never a default and it says so in the log. The environment is still built from the allow-list.
 */
export function createHostWorkspace(dir: string, options: HostWorkspaceOptions = {}): Workspace {
  const root = resolve(dir);
  const logger = options.logger ?? fallbackLogger();
  logger.warn(
    { root },
    "a workspace of isolation none runs commands on this machine as they are; use it only for trusted repositories",
  );
  const env = baseEnv(homedir());
  const lifetime = new AbortController();
  return {
    isolation: "none",
    engine: "local",
    root,
    ...fileOps(root),
    async exec(command, opts = {}) {
      if (lifetime.signal.aborted) throw new Error("The workspace was disposed");
      const cwd = opts.cwd === undefined ? root : await resolveInside(root, opts.cwd);
      const commandEnv = withExtraEnv(env, opts.env);
      return runProcess(
        { file: programPath("bash", commandEnv.PATH), args: ["-c", command], cwd, env: commandEnv },
        {
          timeoutMs: opts.timeoutMs,
          signal: opts.signal ? AbortSignal.any([opts.signal, lifetime.signal]) : lifetime.signal,
        },
      );
    },
    async spawn(command, opts) {
      if (lifetime.signal.aborted) throw new Error("The workspace was disposed");
      const bash = programPath("bash", env.PATH);
      const spec = { file: bash, args: ["-c", command], cwd: root, env, group: true, stream: true };
      const signals = [lifetime.signal, ...(opts.signal ? [opts.signal] : [])];
      return spawnedProcess(launch(spec, opts.onOutput), AbortSignal.any(signals));
    },
    blockedConnections: () => [],
    async dispose() {
      // Commands still running die with the workspace.
      lifetime.abort();
    },
  };
}
