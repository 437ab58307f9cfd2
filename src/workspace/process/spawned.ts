// A process started with its stdin kept open (launch's `stream`), as a Workspace hands it out.
import type { ProcessEnd, WorkspaceProcess } from "../types.ts";
import type { Launched } from "./launcher.ts";

/** `started` as a WorkspaceProcess: killed when `signal` aborts. */
export function spawnedProcess(started: Launched, signal?: AbortSignal): WorkspaceProcess {
  const kill = () => started.kill();
  signal?.addEventListener("abort", kill, { once: true });
  if (signal?.aborted) kill();
  const exited = started.done.then(
    (exit): ProcessEnd => ({ code: exit.code }),
    (error: Error): ProcessEnd => ({ code: null, error: `it could not start: ${error.message}` }),
  );
  void exited.then(() => signal?.removeEventListener("abort", kill));
  return {
    write: async (data) => started.write(data),
    kill,
    exited,
  };
}
