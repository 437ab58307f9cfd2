import { performance } from "node:perf_hooks";
import type { Logger } from "../github/logger.ts";
import {
  DISK_CHECK_MS,
  diskNotice,
  diskUsageMb,
  limitNotice,
  type SandboxLimits,
  withNotice,
} from "./limits.ts";
import type { ExecResult } from "./types.ts";

type Run = (signal: AbortSignal) => Promise<ExecResult>;

/**
 * Runs commands under the disk limit and explains any limit a command hit. Disk use is measured
 * every DISK_CHECK_MS while a command runs (stopping it when over), and after a command unless
 * the last measurement is more recent: how much can be written between two measurements is
 * bounded by the disk's speed, and `du` on every quick command would slow tight loops.
 */
export function limitGuard(paths: readonly string[], limits: SandboxLimits, logger: Logger) {
  let lastCheck = Number.NEGATIVE_INFINITY;
  let measuring = false;
  const measure = () => {
    lastCheck = performance.now();
    return diskUsageMb(paths);
  };

  return async function guarded(run: Run): Promise<ExecResult> {
    const stop = new AbortController();
    let overMb: number | undefined;
    const timer = setInterval(() => {
      if (measuring) return;
      measuring = true;
      measure()
        .then((mb) => {
          if (mb <= limits.diskMb || overMb !== undefined) return;
          overMb = mb;
          stop.abort();
        })
        .catch((error: unknown) => logger.warn({ err: error }, "could not measure disk use"))
        .finally(() => {
          measuring = false;
        });
    }, DISK_CHECK_MS);
    let result: ExecResult;
    try {
      result = await run(stop.signal);
    } finally {
      clearInterval(timer);
    }
    let notice = overMb === undefined ? undefined : diskNotice(overMb, limits, true);
    if (notice === undefined && performance.now() - lastCheck >= DISK_CHECK_MS) {
      const mb = await measure();
      if (mb > limits.diskMb) notice = diskNotice(mb, limits, false);
    }
    notice ??= limitNotice(result, limits);
    if (notice === undefined) return result;
    logger.warn({ notice }, "a sandbox command reached a limit");
    return withNotice(result, notice);
  };
}
