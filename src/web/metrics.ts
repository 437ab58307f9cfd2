// GET /metrics for Prometheus, behind METRICS_TOKEN: the figures describe the whole installation.
import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { Gauge, Registry } from "prom-client";
import { registry } from "../metrics.ts";
import type { Database } from "../store/database.ts";
import { jobCounts } from "../store/job-counts.ts";

const STATES = ["queued", "acknowledged", "running"] as const;

function storeRegistry(db: Database): Registry {
  const store = new Registry();
  let counts: ReturnType<typeof jobCounts> | undefined;
  // One pair of queries per scrape, shared by the gauges below.
  const read = () => {
    counts ??= jobCounts(db.pool).finally(() => {
      counts = undefined;
    });
    return counts;
  };
  new Gauge({
    name: "vmpilot_jobs",
    help: "Jobs not finished yet, by state.",
    labelNames: ["state"] as const,
    registers: [store],
    async collect() {
      const { unfinished } = await read();
      for (const state of STATES) this.set({ state }, unfinished[state] ?? 0);
    },
  });
  new Gauge({
    name: "vmpilot_queue_depth",
    help: "Jobs waiting for a worker.",
    registers: [store],
    async collect() {
      this.set((await read()).unfinished.queued ?? 0);
    },
  });
  new Gauge({
    name: "vmpilot_queue_oldest_age_seconds",
    help: "How long the oldest job waiting for a worker has waited.",
    registers: [store],
    async collect() {
      this.set((await read()).oldestQueuedSeconds);
    },
  });
  return store;
}

function authorized(req: IncomingMessage, token: string): boolean {
  const given = Buffer.from(req.headers.authorization ?? "");
  const wanted = Buffer.from(`Bearer ${token}`);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/** Without a token there is no /metrics at all (404), so nothing is public by default. */
export function metricsHandler(db: Database, token: string | undefined) {
  const all = token ? Registry.merge([registry, storeRegistry(db)]) : undefined;
  return async (req: IncomingMessage, res: ServerResponse): Promise<boolean> => {
    if (!all || !token || req.method !== "GET") return false;
    if ((req.url ?? "").split("?")[0] !== "/metrics") return false;
    if (!authorized(req, token)) {
      res.writeHead(401, {
        "www-authenticate": 'Bearer realm="metrics"',
        "cache-control": "no-store",
      });
      res.end("Unauthorized\n");
      return true;
    }
    const body = await all.metrics();
    res.writeHead(200, { "content-type": all.contentType, "cache-control": "no-store" });
    res.end(body);
    return true;
  };
}
