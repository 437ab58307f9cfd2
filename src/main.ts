// `npm start`: the webhook server and/or the job worker (--role web|worker|all), or Probot's
// setup page when no GitHub App is configured yet.
import "./node-version.ts";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type { Logger } from "pino";
import { createNodeMiddleware, Probot, run } from "probot";
import { SmeeClient } from "smee-client";
import { DEFAULT_ENABLED_PLUGINS, discoverPlugins } from "./agent/plugins.ts";
import { type ChatFaceDeps, mountChatFace } from "./chat/server.ts";
import { type Config, loadConfig, loadDotEnv } from "./config/env.ts";
import { routeModel } from "./config/model-route.ts";
import { type RepoSettings, defaults as repoDefaults } from "./config/repo-config.ts";
import { watchRateLimit } from "./github/rate-limit.ts";
import { health, healthHandler } from "./health.ts";
import { intakeApp } from "./intake/app.ts";
import { capWebhookBody } from "./intake/body-limit.ts";
import { syncAutomations } from "./jobs/automations.ts";
import { startInstallationSync } from "./jobs/installation-sync.ts";
import type { PipelineDeps } from "./jobs/pipeline/run.ts";
import { createQueue, type Queue, type QueueOptions } from "./jobs/queue.ts";
import { Readiness } from "./jobs/readiness.ts";
import { type Backoff, untilReachable } from "./jobs/until-reachable.ts";
import { startVmSweeper } from "./jobs/vm-sweeper.ts";
import { startWorker } from "./jobs/worker.ts";
import { claimWorkerIdentity } from "./jobs/worker-identity.ts";
import { createLogger } from "./log/logger.ts";
import { redact, registerSecret } from "./log/redact.ts";
import { workspaceErrors } from "./metrics.ts";
import { sharedSecret } from "./store/app-secrets.ts";
import { type Database, openDatabase } from "./store/database.ts";
import { mountWeb } from "./web/index.ts";
import { metricsHandler } from "./web/metrics.ts";
import {
  checkProvider,
  type LimitEnforcement,
  limitEnforcement,
  type ProviderName,
} from "./workspace/index.ts";
import { createVmPool, poolOwner, type VmPool } from "./workspace/vm/pool.ts";
import { engineFor, startFlyNetwork } from "./workspace/vm/settings.ts";

export const ROLES = ["web", "worker", "all"] as const;
export type Role = (typeof ROLES)[number];
export const WEBHOOK_PATH = "/api/github/webhooks";

export interface StartOptions {
  config: Config;
  role?: Role;
  /** An open database to use and leave open (tests, benchmarks); else one is opened from config. */
  db?: Database;
  logger?: Logger;
  /** Queue tuning on top of the configured concurrency. */
  queue?: Omit<QueueOptions, "logger">;
  /** Overrides for the agent pipeline (tests point it at fakes); false ends jobs once acknowledged. */
  pipeline?: Partial<PipelineDeps> | false;
  /** Overrides for the chat face (tests point clone URLs at their git server). */
  chat?: Partial<
    Pick<ChatFaceDeps, "cloneUrl" | "pollIntervalMs" | "githubCallsPerMinute" | "imageFetch">
  >;
  /** Backoff between attempts to reach GitHub at startup; default 1 s doubling up to 30 s. */
  githubRetry?: Backoff;
  /** Called once the HTTP server listens, before GitHub has been reached. */
  onListening?(url: string): void;
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

/** Answers a request and returns true, or returns false (or nothing) to pass it on. */
type Handler = (req: IncomingMessage, res: ServerResponse) => unknown;

/** Starts the configured roles and an HTTP server on config.host:config.port (0 picks a port). */
export async function startServer(options: StartOptions): Promise<RunningServer> {
  const { config } = options;
  const role = options.role ?? "all";
  if (config.appId === undefined || !config.privateKey) {
    throw new Error("APP_ID and PRIVATE_KEY are required; without them run the setup page");
  }
  const providerKeys = [...config.providers.values()].map((p) => p.apiKey);
  for (const secret of [
    config.webhookSecret,
    config.privateKey,
    config.anthropicApiKey,
    config.apiKey,
    ...providerKeys,
  ]) {
    registerSecret(secret);
  }
  const logger =
    options.logger ?? createLogger({ level: config.logLevel, format: config.logFormat });
  const cleanup: Array<() => Promise<unknown> | unknown> = [];
  const close = async () => {
    for (const step of cleanup.reverse()) await step();
    cleanup.length = 0;
  };
  try {
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
    const probot = new Probot({
      appId: config.appId,
      privateKey: config.privateKey,
      secret: config.webhookSecret,
      baseUrl: config.baseUrl,
      log: logger,
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
    const settingsDefaults: RepoSettings = {
      ...repoDefaults,
      label: config.label,
      allowedUsers: config.allowedUsers,
      plugins: [...DEFAULT_ENABLED_PLUGINS],
      model: config.model,
    };
    let appSlug: string | undefined;
    if (role !== "worker") {
      const web = mountWeb({
        db,
        logger,
        config: {
          publicUrl: config.publicUrl,
          sessionSecret: await webSessionSecret(config, db),
          oauth: config.oauth,
          githubApiUrl: config.baseUrl,
          githubWebUrl: config.githubWebUrl,
          defaults: settingsDefaults,
          plugins: plugins.map((plugin) => plugin.name),
          providers: config.providers,
          clientAddressHeader: config.clientAddressHeader,
        },
      });
      // Live job pages hold their connections open; the server cannot close before they end.
      cleanup.push(() => web.close());
      appSlug = await untilReachable(() => fetchAppSlug(probot), {
        ...options.githubRetry,
        readiness,
        logger,
        cleanup,
      });
      const chat = mountChatFace({
        db,
        queue,
        operatorKey: config.apiKey,
        auth: (id) => probot.auth(id),
        allowedUsers: config.allowedUsers,
        cloneUrl: (fullName) => `${config.githubWebUrl}/${fullName}.git`,
        defaults: settingsDefaults,
        ratePerMinute: config.chatRatePerMinute,
        clientAddressHeader: config.clientAddressHeader,
        logger,
        ...options.chat,
      });
      cleanup.push(() => chat.close());
      const intake = intakeApp({
        db,
        queue,
        appSlug,
        label: config.label,
        command: config.command,
      });
      // Webhooks first: they are the hot path, and need no trip through the page router.
      const webhooks = await createNodeMiddleware(intake, { probot, webhooksPath: WEBHOOK_PATH });
      handlers.push(capWebhookBody(WEBHOOK_PATH, webhooks));
      handlers.push(chat.handler);
      handlers.push(web.handler);
    }
    if (role !== "web") {
      let vmPool: VmPool | undefined;
      if (options.pipeline !== false) {
        const provider = options.pipeline?.provider ?? config.workspaceProvider;
        checkSandbox(provider, readiness, logger);
        if (provider === "sandbox" || provider === "agent") {
          void reportSandboxLimits(logger).then((found) => {
            sandboxLimits = found;
          });
        }
        if (provider === "fly" || config.vmProvider === "fly") void startFlyNetwork(logger);
        const pool = identity && poolOwner(identity.id, randomBytes(4).toString("hex"));
        if (pool && config.warmPool > 0 && (provider === "fly" || provider === "kubernetes")) {
          try {
            const started = createVmPool(engineFor(provider), config.warmPool, pool.owner, logger);
            cleanup.push(() => started.close());
            vmPool = started;
          } catch {
            // Bad engine settings: checkSandbox logs them and keeps the worker unready.
          }
        }
        cleanup.push(startVmSweeper(provider, db.pool, logger, pool?.stale));
      }
      const auth = async (installationId: number) => {
        const octokit = await probot.auth(installationId);
        watchRateLimit(octokit, String(installationId));
        return octokit;
      };
      // Scheduled automations' jobs are the app's own: the web role knows its slug already.
      let slug = appSlug === undefined ? undefined : Promise.resolve(appSlug);
      const knownSlug = () => {
        slug ??= fetchAppSlug(probot).catch((error: unknown) => {
          slug = undefined;
          throw error;
        });
        return slug;
      };
      await startWorker({
        db,
        queue,
        auth,
        appSlug: knownSlug,
        allowedUsers: config.allowedUsers,
        defaults: settingsDefaults,
        publicUrl: config.publicUrl,
        logger,
        pipeline:
          options.pipeline === false
            ? undefined
            : {
                db,
                auth,
                installationToken: (id) => installationToken(probot, id),
                publicUrl: config.publicUrl,
                dataDir: config.dataDir,
                spareCheckouts: config.spareCheckouts,
                provider: config.workspaceProvider,
                vmProvider: config.vmProvider,
                vmPool,
                allowPrivate: config.networkAllowPrivate,
                sandboxLimits: config.sandboxLimits,
                logger,
                plugins,
                anthropic: { apiKey: config.anthropicApiKey },
                providers: config.providers,
                defaults: settingsDefaults,
                readyQueue: queue,
                ...options.pipeline,
              },
      });
      const automations = {
        db,
        queue,
        auth,
        appSlug: knownSlug,
        defaults: settingsDefaults,
        logger,
      };
      const sync = await startInstallationSync(queue, config.installationSyncMinutes, {
        pool: db.pool,
        app: () => probot.auth(),
        auth,
        logger,
        afterSync: (signal) => syncAutomations(automations, {}, signal),
      });
      cleanup.push(sync);
    }
    if (config.webhookProxyUrl && role !== "worker") {
      const smee = new SmeeClient({
        source: config.webhookProxyUrl,
        target: `${url}${WEBHOOK_PATH}`,
        logger: { info: (msg) => logger.info(msg), error: (msg) => logger.error(msg) },
      });
      await smee.start();
      cleanup.push(() => smee.stop());
    }
    logger.info({ url, role, embedded: db.embedded, appSlug }, "vmpilot started");
    return { url, role, db, queue, probot, appSlug, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * SESSION_SECRET, or one made once and kept in the database: the .env that Probot's setup page
 * writes has none, and every web process behind the database must sign cookies alike.
 */
async function webSessionSecret(config: Config, db: Database): Promise<string> {
  const secret = config.sessionSecret ?? (await sharedSecret(db.pool, "web-session"));
  registerSecret(secret);
  return secret;
}

async function installationToken(probot: Probot, installationId: number): Promise<string> {
  const octokit = await probot.auth(installationId);
  const { token } = (await octokit.auth({ type: "installation" })) as { token: string };
  return token;
}

async function fetchAppSlug(probot: Probot): Promise<string> {
  const octokit = await probot.auth();
  // untilReachable does the retrying, with backoff that Octokit's retry plugin does not have.
  const { data } = await octokit.rest.apps.getAuthenticated({ request: { retries: 0 } });
  if (!data?.slug) throw new Error("GET /app did not return the app's slug");
  return data.slug;
}

/** Finds out at startup whether jobs can get a workspace, and keeps the worker unready if not. */
function checkSandbox(provider: ProviderName, readiness: Readiness, logger: Logger): void {
  readiness.wait("sandbox", "checking");
  checkProvider(provider).then(
    () => readiness.ready("sandbox"),
    (error: Error) => {
      workspaceErrors.inc({ kind: "sandbox_unavailable" });
      readiness.wait("sandbox", "unavailable");
      logger.error(`jobs cannot run: ${error.message}`);
    },
  );
}

/** Says once at startup which sandbox limits the kernel does not hold here, and why. */
async function reportSandboxLimits(logger: Logger): Promise<LimitEnforcement> {
  const found = await limitEnforcement();
  if (!found.kernel) {
    logger.warn({ sandboxLimits: found }, "some sandbox limits are only best effort on this host");
  }
  return found;
}

async function listen(
  handlers: Handler[],
  config: Config,
  logger: Logger,
  cleanup: Array<() => Promise<unknown> | unknown>,
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

function parseRole(argv: string[]): Role {
  const { values } = parseArgs({ args: argv, options: { role: { type: "string" } } });
  const role = values.role ?? "all";
  if (!(ROLES as readonly string[]).includes(role)) {
    throw new Error(`--role must be one of ${ROLES.join(", ")}, not "${role}"`);
  }
  return role as Role;
}

export async function main(argv = process.argv.slice(2)): Promise<void> {
  loadDotEnv();
  const loaded = loadConfig();
  if ("problems" in loaded) {
    for (const problem of loaded.problems)
      console.error(`vmpilot: invalid configuration: ${problem}`);
    process.exit(1);
  }
  const { config } = loaded;
  try {
    const role = parseRole(argv);
    if (config.appId === undefined) {
      const setup = await startSetupServer(config);
      onSignal(() => setup.stop());
      return;
    }
    if (
      role !== "web" &&
      !config.anthropicApiKey &&
      routeModel(config.model, config.providers).provider === "anthropic"
    ) {
      console.error(
        "vmpilot: invalid configuration: ANTHROPIC_API_KEY: is required to run jobs on Anthropic's models (or set VMPILOT_MODEL to another provider's model, or start with --role web)",
      );
      process.exit(1);
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

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
}
