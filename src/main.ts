// `npm start`: the webhook server and/or the job worker (--role web|worker|all), or Probot's
// setup page when no GitHub App is configured yet.
import { once } from "node:events";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import type { Logger } from "pino";
import { createNodeMiddleware, Probot, run } from "probot";
import { SmeeClient } from "smee-client";
import { DEFAULT_ENABLED_PLUGINS, discoverPlugins } from "./agent/plugins.ts";
import { type Config, loadConfig, loadDotEnv } from "./config/env.ts";
import { type RepoSettings, defaults as repoDefaults } from "./config/repo-config.ts";
import { createLogger } from "./github/logger.ts";
import { redact, registerSecret } from "./github/redact.ts";
import { intakeApp } from "./intake/app.ts";
import { capWebhookBody } from "./intake/body-limit.ts";
import { health } from "./jobs/health.ts";
import type { PipelineDeps } from "./jobs/pipeline.ts";
import { createQueue, type Queue, type QueueOptions } from "./jobs/queue.ts";
import { startWorker } from "./jobs/worker.ts";
import { type Database, openDatabase } from "./store/database.ts";
import { healthHandler } from "./web/health.ts";
import { mountWeb } from "./web/index.ts";

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
  for (const secret of [config.webhookSecret, config.privateKey, config.anthropicApiKey]) {
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
    const queue = createQueue(db, {
      concurrency: config.workerConcurrency,
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
    const handlers: Handler[] = [healthHandler(() => health(db, queue), role)];
    const plugins = await discoverPlugins();
    const settingsDefaults: RepoSettings = {
      ...repoDefaults,
      label: config.label,
      allowedUsers: config.allowedUsers,
      plugins: [...DEFAULT_ENABLED_PLUGINS],
    };
    let appSlug: string | undefined;
    if (role !== "worker") {
      const web = mountWeb({
        db,
        logger,
        config: {
          publicUrl: config.publicUrl,
          sessionSecret: config.sessionSecret,
          oauth: config.oauth,
          githubApiUrl: config.baseUrl,
          githubWebUrl: config.githubWebUrl,
          defaults: settingsDefaults,
          plugins: plugins.map((plugin) => plugin.name),
        },
      });
      // Live job pages hold their connections open; the server cannot close before they end.
      cleanup.push(() => web.close());
      appSlug = await fetchAppSlug(probot);
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
      handlers.push(web.handler);
    }
    if (role !== "web") {
      const auth = (installationId: number) => probot.auth(installationId);
      await startWorker({
        db,
        queue,
        auth,
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
                logger,
                plugins,
                anthropic: { apiKey: config.anthropicApiKey },
                defaults: settingsDefaults,
                ...options.pipeline,
              },
      });
    }
    const url = await listen(handlers, config, logger, cleanup);
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

async function installationToken(probot: Probot, installationId: number): Promise<string> {
  const octokit = await probot.auth(installationId);
  const { token } = (await octokit.auth({ type: "installation" })) as { token: string };
  return token;
}

async function fetchAppSlug(probot: Probot): Promise<string> {
  const octokit = await probot.auth();
  const { data } = await octokit.rest.apps.getAuthenticated();
  if (!data?.slug) throw new Error("GET /app did not return the app's slug");
  return data.slug;
}

async function listen(
  handlers: Handler[],
  config: Config,
  logger: Logger,
  cleanup: Array<() => Promise<unknown> | unknown>,
): Promise<string> {
  const server = createServer(async (req, res) => {
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
    server.close();
    server.closeAllConnections();
    await closed;
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
    if (role !== "web" && !config.anthropicApiKey) {
      console.error(
        "vmpilot: invalid configuration: ANTHROPIC_API_KEY: is required to run jobs (or start with --role web)",
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
