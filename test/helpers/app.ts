// The real server, started in-process for tests: test configuration with a generated app key.
import { generateKeyPairSync } from "node:crypto";
import { ProbotOctokit } from "probot";
import type { Config } from "../../src/config/env.ts";
import { DEFAULT_MODEL } from "../../src/config/models.ts";
import { DEFAULT_WORKSPACE } from "../../src/config/workspace.ts";
import { createLogger } from "../../src/log/logger.ts";
import { type RunningServer, type StartOptions, startServer } from "../../src/main.ts";
import type { Database } from "../../src/store/database.ts";
import { DEFAULT_LIMITS } from "../../src/workspace/sandbox/limits.ts";
import { noSecondaryWait } from "./secondary-wait.ts";

export const WEBHOOK_SECRET = "test-webhook-secret-4f2a";
export const APP_SLUG = "vmpilot-bot";

let key: string | undefined;

/** An RSA key in the PEM form GitHub hands out, generated once per test process. */
export function appPrivateKey(): string {
  key ??= generateKeyPairSync("rsa", { modulusLength: 2048 })
    .privateKey.export({ type: "pkcs1", format: "pem" })
    .toString();
  return key;
}

export function testConfig(overrides: Partial<Config> = {}): Config {
  return {
    appId: 12345,
    privateKey: appPrivateKey(),
    webhookSecret: WEBHOOK_SECRET,
    dataDir: "memory://",
    logLevel: "silent",
    logFormat: "json",
    host: "127.0.0.1",
    port: 0,
    baseUrl: "https://api.github.com",
    label: "vmpilot",
    command: "vmpilot",
    workerConcurrency: 2,
    spareCheckouts: 20,
    workspace: DEFAULT_WORKSPACE,
    warmPool: 0,
    shutdownDrainSeconds: 5,
    publicUrl: "https://vmpilot.test",
    allowedUsers: [],
    networkAllowPrivate: [],
    sandboxLimits: DEFAULT_LIMITS,
    providers: new Map(),
    model: DEFAULT_MODEL,
    production: false,
    oauth: null,
    sessionSecret: "test-session-secret-0123456789abcdef",
    githubWebUrl: "https://github.com",
    chatRatePerMinute: 60,
    // Tests that want the reconciliation with GitHub turn it on.
    installationSyncMinutes: 0,
    mcpSecrets: [],
    mcpServers: {},
    ...overrides,
  };
}

/**
 * The app's client class for servers under test (StartOptions.Octokit): Probot's, with retry
 * delays of a millisecond, no wait on a secondary rate limit, and throttling off, which would
 * space an installation's writes a second apart.
 */
export const TestProbotOctokit = ProbotOctokit.defaults((options: object) => {
  const { retry, throttle } = options as { retry?: object; throttle?: object };
  return {
    ...options,
    retry: { ...retry, retryAfterBaseValue: 1 },
    throttle: { ...throttle, enabled: false },
    secondaryRateLimit: noSecondaryWait,
  };
});

/**
 * startServer on a loopback port with quiet logs and a fast-polling queue. Jobs end once
 * answered unless the caller passes work options.
 */
export function startTestServer(
  db: Database,
  options: Partial<Omit<StartOptions, "db">> = {},
): Promise<RunningServer> {
  const config = options.config ?? testConfig();
  return startServer({
    role: "all",
    work: false,
    logger: createLogger({ level: config.logLevel, format: "json" }),
    Octokit: TestProbotOctokit,
    ...options,
    config,
    db,
    queue: { pollingIntervalSeconds: 0.5, retryDelay: 1, ...options.queue },
  });
}
