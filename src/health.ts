import type { Database } from "../store/database.ts";
import type { LimitEnforcement } from "../workspace/index.ts";
import type { Queue } from "./queue.ts";
import { Readiness } from "./readiness.ts";

export interface Health {
  database: "ok" | "error";
  queue: "ok" | "error";
  /** Parts of the process that are not ready yet, and why; empty when all are. */
  waiting: Record<string, string>;
  /** A worker with a local sandbox: which SANDBOX_MAX_* limits the kernel holds on this host. */
  sandboxLimits?: LimitEnforcement;
}

const CHECK_TIMEOUT_MS = 2000;

async function within(check: Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), CHECK_TIMEOUT_MS);
  });
  try {
    return await Promise.race([check.then((ok) => ok !== false), timeout]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What GET /healthz reports. Each check gives up after two seconds rather than hang the probe.
 * The body is public: it names no store, version or address a stranger could aim at.
 */
export async function health(
  db: Database,
  queue: Queue,
  readiness = new Readiness(),
): Promise<Health> {
  const [database, queueOk] = await Promise.all([
    within(db.pool.query("SELECT 1")),
    within(queue.healthy()),
  ]);
  return {
    database: database ? "ok" : "error",
    queue: queueOk ? "ok" : "error",
    waiting: readiness.waiting(),
  };
}
