// Prometheus metrics of this process. Counters and histograms are per process, as Prometheus
// expects: it scrapes every web and worker process and sums them. What the database knows (jobs
// by state, the queue) is read at scrape time by src/web/metrics.ts, the same from any process.
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: "vmpilot_" });

export const deliveries = new Counter({
  name: "vmpilot_webhook_deliveries_total",
  help: "Webhook deliveries the intake handled, by event and outcome (job, ignored, duplicate).",
  labelNames: ["event", "outcome"] as const,
  registers: [registry],
});

export const jobDuration = new Histogram({
  name: "vmpilot_job_duration_seconds",
  help: "Time from a worker taking a job to its end, by outcome.",
  labelNames: ["outcome"] as const,
  buckets: [5, 15, 30, 60, 120, 300, 600, 1200, 2400, 3600],
  registers: [registry],
});

export const modelTokens = new Counter({
  name: "vmpilot_model_tokens_total",
  help: "Model tokens used by jobs, by kind (input, output, cache_read, cache_write).",
  labelNames: ["kind"] as const,
  registers: [registry],
});

export const modelCost = new Counter({
  name: "vmpilot_model_cost_usd_total",
  help: "What jobs' model requests cost, in US dollars.",
  registers: [registry],
});

export const githubRateLimit = new Gauge({
  name: "vmpilot_github_rate_limit_remaining",
  help: "Requests left in GitHub's current rate-limit window, as its last response said; by installation ('app' for the app itself).",
  labelNames: ["installation"] as const,
  registers: [registry],
});

export const workspaceErrors = new Counter({
  name: "vmpilot_workspace_errors_total",
  help: "Workspaces that could not be opened or set up, by kind (sandbox_unavailable, setup_failed, open_failed).",
  labelNames: ["kind"] as const,
  registers: [registry],
});
