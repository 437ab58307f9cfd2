// Every worker on a VM provider sweeps now and again for VMs left by attempts that ended or died
// with their worker (the VM of a killed worker's job is destroyed once its job is retried or ends).
import type { Logger } from "../log/logger.ts";
import { attemptRunning } from "../store/job-lifecycle.ts";
import type { Queryable } from "../store/sql.ts";
import type { Engine } from "../workspace/index.ts";
import type { VmEngine } from "../workspace/vm/engine.ts";
import { engineFor } from "../workspace/vm/settings.ts";
import { sweepVms } from "../workspace/vm/sweep.ts";

const EVERY_MS = 60_000;

/** One sweep; resolves to the number of VMs destroyed. */
export function sweepOnce(
  engine: VmEngine,
  db: Queryable,
  stalePool?: (owner: string) => boolean,
): Promise<number> {
  return sweepVms(engine, (jobId, attempt) => attemptRunning(db, jobId, attempt), stalePool);
}

/** Starts sweeping for a VM provider (nothing to do for the others); returns the stop. */
export function startVmSweeper(
  provider: Engine,
  db: Queryable,
  logger: Logger,
  stalePool?: (owner: string) => boolean,
): () => void {
  if (provider !== "fly" && provider !== "kubernetes") return () => undefined;
  const sweep = async () => {
    try {
      const destroyed = await sweepOnce(engineFor(provider), db, stalePool);
      if (destroyed > 0) logger.info({ destroyed }, "destroyed VMs of ended attempts");
    } catch (error) {
      logger.warn({ err: error }, "could not sweep the workspace VMs");
    }
  };
  void sweep();
  const timer = setInterval(sweep, EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
