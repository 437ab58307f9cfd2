// GET /healthz: JSON for load balancers and the Docker HEALTHCHECK; 503 when a dependency is down.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Health } from "../jobs/health.ts";

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
