// GET /healthz: the database, the queue and what is not ready yet, as JSON for load balancers and
// the Docker HEALTHCHECK; 503 when a dependency is down.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Queue } from "./jobs/queue/queue.ts";
import { Readiness } from "./roles/readiness.ts";
import type { Database } from "./store/database.ts";
import type { LimitEnforcement } from "./workspace/index.ts";

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

export function healthHandler(check: () => Promise<Health>, role: string) {
  return async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    if (req.method !== "GET" && req.method !== "HEAD") return false;
    if ((req.url ?? "").split("?")[0] !== "/healthz") return false;
    const health = await check();
    const ok =
      health.database === "ok" && health.queue === "ok" && Object.keys(health.waiting).length === 0;
    const body = JSON.stringify({ status: ok ? "ok" : "error", role, ...health });
    res.writeHead(ok ? 200 : 503, {
      "content-type": "application/json",
      "cache-control": "no-store",
    });
    res.end(req.method === "HEAD" ? undefined : body);
    return true;
  };
}
