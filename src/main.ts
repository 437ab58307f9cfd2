// `npm start` (bin/start.js): the webhook server and/or the job worker (--role web|worker|all), or Probot's
// setup page when no GitHub App is configured yet.
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { Probot, ProbotOctokit, run } from "probot";
import { SmeeClient } from "smee-client";
import { DEFAULT_ENABLED_PLUGINS, discoverPlugins } from "./agent/plugins.ts";
import type { Config } from "./config/env.ts";
import { type RepoSettings, defaults as repoDefaults } from "./config/repo-config.ts";
import { retrySecondaryRateLimits } from "./github/rate-limit.ts";
import { traceRequests } from "./github/request-spans.ts";
import { health, healthHandler } from "./health.ts";
import type { WebhookBodyLimits } from "./intake/body-limit.ts";
import { createQueue, type Queue, type QueueOptions } from "./jobs/queue/queue.ts";
import type { JobDeps } from "./jobs/run/deps.ts";
import { createLogger } from "./log/logger.ts";
import { redact, registerSecret } from "./log/redact.ts";
import type { Cleanup, Handler, RoleContext } from "./roles/context.ts";
import { Readiness } from "./roles/readiness.ts";
import type { Role, Startup } from "./roles/startup.ts";
import { startTracing } from "./roles/tracing.ts";
import type { Backoff } from "./roles/until-reachable.ts";
import { type ChatOverrides, forwardWebhooks, startWeb } from "./roles/web.ts";
import { startWorkerRole } from "./roles/worker.ts";
import { claimWorkerIdentity } from "./roles/worker-identity.ts";
import { type Database, openDatabase } from "./store/database.ts";
import { metricsHandler } from "./web/metrics.ts";
import type { LimitEnforcement } from "./workspace/index.ts";

export { WEBHOOK_PATH } from "./roles/web.ts";

export interface StartOptions {
  config: Config;
  role?: Role;
  /** An open database to use and leave open (tests, benchmarks); else one is opened from config. */
  db?: Database;
  logger?: Logger;
  /** Queue tuning on top of the configured concurrency. */
  queue?: Omit<QueueOptions, "logger">;
  /** Overrides for the jobs' deps (tests point them at fakes); false ends jobs once answered. */
  work?: Partial<JobDeps> | false;
  /** Overrides for the chat face (tests point clone URLs at their git server). */
  chat?: ChatOverrides;
  /** Caps and timeouts on webhook bodies; the defaults are GitHub's (src/intake/body-limit.ts). */
  webhooks?: WebhookBodyLimits;
  /** Backoff between attempts to reach GitHub at startup; default 1 s doubling up to 30 s. */
  githubRetry?: Backoff;
  /** Called once the HTTP server listens, before GitHub has been reached. */
  onListening?(url: string): void;
  /**
   * The class Probot makes its GitHub clients from (secondary rate limits retried in place on
   * top); default Probot's own. Tests pass one whose throttling does not space each
   * installation's writes a second apart.
   */
  Octokit?: typeof ProbotOctokit;
}

export interface RunningServer {
  /** Where the HTTP server listens, e.g. http://127.0.0.1:3000. */
  url: string;
  role: Role;
  db: Database;
  queue: Queue;
  probot: Probot;
  /** The app's slug (web roles), fetched once from GET /app. */
  appSlug?: string;
  close(): Promise<void>;
}

/** Starts the configured roles and an HTTP server on config.host:config.port (0 picks a port). */
export async function startServer(options: StartOptions): Promise<RunningServer> {
  const { config } = options;
  const role = options.role ?? "all";
  if (config.appId === undefined || !config.privateKey) {
    throw new Error("APP_ID and PRIVATE_KEY are required; without them run the setup page");
  }
  registerSecrets(config);
  const logger =
    options.logger ?? createLogger({ level: config.logLevel, format: config.logFormat });
  const cleanup: Cleanup = [];
  const close = async () => {
    for (const step of cleanup.reverse()) await step();
    cleanup.length = 0;
  };
  try {
    // First, so that it stops last: the spans of everything that stops before it are sent.
    if (config.tracing) cleanup.push(startTracing(config.tracing, role, logger));
    const { db, identity, queue } = await openStore(options, role, logger, cleanup);
    const probot = new Probot({
      appId: config.appId,
      privateKey: config.privateKey,
      secret: config.webhookSecret,
      baseUrl: config.baseUrl,
      log: logger,
      Octokit: (options.Octokit ?? ProbotOctokit).plugin(retrySecondaryRateLimits, traceRequests),
    });
    const readiness = new Readiness();
    if (role !== "worker") readiness.wait("github", "connecting");
    let sandboxLimits: LimitEnforcement | undefined;
    const handlers: Handler[] = [
      healthHandler(async () => ({ ...(await health(db, queue, readiness)), sandboxLimits }), role),
      metricsHandler(db, config.metricsToken),
    ];
    // Listen first: while GitHub or the sandbox is not ready, /healthz says so instead of the
    // port being closed (containers often start before DNS does).
    const url = await listen(handlers, config, logger, cleanup);
    options.onListening?.(url);
    const plugins = await discoverPlugins();
    const defaults = settingsDefaults(config);
    const ctx: RoleContext = {
      config,
      db,
      queue,
      probot,
      readiness,
      logger,
      cleanup,
      plugins,
      defaults,
    };
    const appSlug = role === "worker" ? undefined : await startWeb(ctx, handlers, options);
    if (role !== "web") {
      await startWorkerRole(ctx, {
        identity,
        appSlug,
        work: options.work,
        onSandboxLimits: (found) => {
          sandboxLimits = found;
        },
      });
    }
    if (role !== "worker") await forwardWebhooks(ctx, url);
    logger.info({ url, role, embedded: db.embedded, appSlug }, "vmpilot started");
    return { url, role, db, queue, probot, appSlug, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Every secret the configuration holds, so that no log line shows one. */
function registerSecrets(config: Config): void {
  const providerKeys = [...config.providers.values()].map((p) => p.apiKey);
  for (const secret of [
    config.webhookSecret,
    config.privateKey,
    config.anthropicApiKey,
    config.apiKey,
    ...providerKeys,
    ...config.mcpSecrets.map((secret) => secret.value),
    ...Object.values(config.tracing?.headers ?? {}),
  ]) {
    registerSecret(secret);
  }
}

/** What both roles stand on: the database, the queue, and a worker's identity. */
async function openStore(options: StartOptions, role: Role, logger: Logger, cleanup: Cleanup) {
  const { config } = options;
  const db =
    options.db ??
    (await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, logger }));
  if (!options.db) cleanup.push(() => db.close());
  // Only workers run jobs, so only they have jobs of a previous instance to recover.
  const identity = role === "web" ? undefined : await claimWorkerIdentity(config.dataDir, logger);
  if (identity) cleanup.push(() => identity.release());
  const queue = createQueue(db, {
    concurrency: config.workerConcurrency,
    workerId: identity?.id,
    drainSeconds: config.shutdownDrainSeconds,
    ...options.queue,
    logger,
  });
  await queue.start();
  cleanup.push(() => queue.stop());
  return { db, identity, queue };
}

/** The built-in settings with the operator's: what a repository without settings runs with. */
function settingsDefaults(config: Config): RepoSettings {
  return {
    ...repoDefaults,
    label: config.label,
    allowedUsers: config.allowedUsers,
    plugins: [...DEFAULT_ENABLED_PLUGINS],
    model: config.model,
    mcp: config.mcpServers,
  };
}

async function listen(
  handlers: Handler[],
  config: Config,
  logger: Logger,
  cleanup: Cleanup,
): Promise<string> {
  let closing = false;
  const server = createServer(async (req, res) => {
    // A keep-alive connection would hold the closing server open until the drain time ran out.
    res.once("finish", () => {
      if (closing) req.socket.end();
    });
    try {
      for (const handler of handlers) {
        if (await handler(req, res)) return;
      }
      if (!res.headersSent) res.writeHead(404).end();
    } catch (error) {
      logger.error({ err: error, url: req.url }, "request failed");
      if (!res.headersSent) res.writeHead(500).end();
    }
  });
  server.keepAliveTimeout = 65_000;
  server.listen(config.port, config.host);
  await once(server, "listening");
  cleanup.push(async () => {
    const closed = once(server, "close");
    closing = true;
    // No new connections; requests in flight (webhooks being stored) may finish for the drain time.
    server.close();
    server.closeIdleConnections();
    const cut = setTimeout(() => server.closeAllConnections(), config.shutdownDrainSeconds * 1000);
    await closed;
    clearTimeout(cut);
  });
  const { address, port, family } = server.address() as AddressInfo;
  return `http://${family === "IPv6" ? `[${address}]` : address}:${port}`;
}

/** First run: Probot's setup page creates the GitHub App from app.yml and writes .env. */
export async function startSetupServer(config: Config) {
  const logger = createLogger({ level: config.logLevel, format: config.logFormat });
  return run(() => {}, {
    env: { ...process.env, HOST: config.host, PORT: String(config.port) },
    log: logger,
    SmeeClient,
  });
}

/** `npm start` (bin/start.js), once readStartup has read what to start. */
export async function main({ config, role }: Startup): Promise<void> {
  try {
    if (config.appId === undefined) {
      const setup = await startSetupServer(config);
      onSignal(() => setup.stop());
      return;
    }
    const server = await startServer({ config, role });
    onSignal(() => server.close());
  } catch (error) {
    console.error(`vmpilot: failed to start: ${redact((error as Error).message ?? String(error))}`);
    process.exit(1);
  }
}

function onSignal(stop: () => Promise<unknown>) {
  const handle = () => {
    stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGINT", handle);
  process.once("SIGTERM", handle);
}
