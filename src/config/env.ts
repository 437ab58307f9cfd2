// The process environment, validated once at startup. Every problem is reported, one per line.
import { createPrivateKey } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseEnv } from "node:util";
import { z } from "zod";
import { parseAddressRange } from "./address-policy.ts";
import { routeModel } from "./model-route.ts";
import { DEFAULT_MODEL } from "./models.ts";
import { loadProviders, type ProviderTable } from "./providers.ts";
import {
  DEFAULT_LIMITS,
  type ProviderName,
  type SandboxLimits,
  type VmProviderName,
} from "./workspace.ts";

const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

const blankToUndefined = (value: unknown) =>
  typeof value === "string" && value.trim() === "" ? undefined : value;
const optionalString = z.preprocess(blankToUndefined, z.string().optional());
const integer = (min: number, max: number, fallback: number) =>
  z.preprocess(
    blankToUndefined,
    z
      .string()
      .regex(/^\d+$/, `must be an integer from ${min} to ${max}`)
      .transform(Number)
      .pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`))
      .default(fallback),
  );
const url = (protocols: RegExp, hint: string) =>
  z.preprocess(
    blankToUndefined,
    z
      .string()
      .refine((value) => URL.canParse(value) && protocols.test(new URL(value).protocol), hint)
      .optional(),
  );

const SANDBOX_LIMIT_VARS = {
  SANDBOX_MAX_PROCESSES: integer(16, 1_000_000, DEFAULT_LIMITS.processes),
  SANDBOX_MAX_MEMORY_MB: integer(64, 10_000_000, DEFAULT_LIMITS.memoryMb),
  SANDBOX_MAX_FILE_MB: integer(1, 10_000_000, DEFAULT_LIMITS.fileMb),
  SANDBOX_MAX_DISK_MB: integer(16, 100_000_000, DEFAULT_LIMITS.diskMb),
};
const sandboxLimitsSchema = z.object(SANDBOX_LIMIT_VARS);

function toLimits(e: z.output<typeof sandboxLimitsSchema>): SandboxLimits {
  return {
    processes: e.SANDBOX_MAX_PROCESSES,
    memoryMb: e.SANDBOX_MAX_MEMORY_MB,
    fileMb: e.SANDBOX_MAX_FILE_MB,
    diskMb: e.SANDBOX_MAX_DISK_MB,
  };
}

/** The sandbox limits alone, for the CLI, which needs no GitHub App; one problem per variable. */
export function loadSandboxLimits(env: Env): { limits: SandboxLimits } | { problems: string[] } {
  const parsed = sandboxLimitsSchema.safeParse(env);
  if (parsed.success) return { limits: toLimits(parsed.data) };
  return { problems: parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`) };
}

const schema = z.object({
  GITHUB_CLIENT_ID: optionalString,
  GITHUB_CLIENT_SECRET: optionalString,
  SESSION_SECRET: z.preprocess(
    blankToUndefined,
    z.string().min(32, "must be at least 32 characters (e.g. openssl rand -hex 32)").optional(),
  ),
  NODE_ENV: optionalString,
  APP_ID: z.preprocess(
    blankToUndefined,
    z.string().regex(/^\d+$/, "must be the numeric GitHub App id").transform(Number).optional(),
  ),
  PRIVATE_KEY: optionalString,
  PRIVATE_KEY_PATH: optionalString,
  WEBHOOK_SECRET: optionalString,
  WEBHOOK_PROXY_URL: url(/^https?:$/, "must be an http(s) URL, e.g. https://smee.io/abc"),
  DATABASE_URL: url(/^postgres(ql)?:$/, "must be a postgres:// URL"),
  DATA_DIR: z.preprocess(blankToUndefined, z.string().default("./data")),
  LOG_LEVEL: z.preprocess(
    (value) => (typeof value === "string" ? blankToUndefined(value.toLowerCase()) : value),
    z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(", ")}` }).default("info"),
  ),
  LOG_FORMAT: z.preprocess(
    blankToUndefined,
    z.enum(["json", "pretty"], { error: "must be json or pretty" }).optional(),
  ),
  ANTHROPIC_API_KEY: optionalString,
  VMPILOT_MODEL: optionalString,
  HOST: z.preprocess(blankToUndefined, z.string().default("localhost")),
  PORT: integer(0, 65535, 3000),
  GHE_HOST: z.preprocess(
    blankToUndefined,
    z
      .string()
      .regex(/^[A-Za-z0-9.-]+(:\d+)?$/, "must be a host name such as github.example.com")
      .optional(),
  ),
  GHE_PROTOCOL: z.preprocess(
    blankToUndefined,
    z.enum(["http", "https"], { error: "must be http or https" }).default("https"),
  ),
  VMPILOT_LABEL: z.preprocess(blankToUndefined, z.string().max(50).default("vmpilot")),
  VMPILOT_COMMAND: z.preprocess(
    blankToUndefined,
    z
      .string()
      .regex(/^[a-z][a-z0-9-]{0,30}$/, "must be a lowercase word such as vmpilot")
      .default("vmpilot"),
  ),
  WORKER_CONCURRENCY: integer(1, 100, 2),
  SPARE_CHECKOUTS: integer(0, 10_000, 20),
  WORKSPACE_PROVIDER: z.preprocess(
    blankToUndefined,
    z
      .enum(
        ["sandbox", "agent", "fly", "kubernetes"],
        "must be sandbox, agent (the workspace agent in a sandbox), fly or kubernetes",
      )
      .default("agent"),
  ),
  WORKSPACE_VM_PROVIDER: z.preprocess(
    blankToUndefined,
    z.enum(["fly", "kubernetes"], "must be fly or kubernetes").optional(),
  ),
  WORKSPACE_WARM_POOL: integer(0, 50, 0),
  SHUTDOWN_DRAIN_SECONDS: integer(1, 3600, 30),
  METRICS_TOKEN: z.preprocess(
    blankToUndefined,
    z.string().min(16, "must be at least 16 characters (a bearer token for /metrics)").optional(),
  ),
  VMPILOT_API_KEY: z.preprocess(
    blankToUndefined,
    z.string().min(32, "must be at least 32 characters (the chat face's operator key)").optional(),
  ),
  CHAT_RATE_PER_MINUTE: integer(1, 100_000, 60),
  CLIENT_ADDRESS_HEADER: z.preprocess(
    blankToUndefined,
    z
      .string()
      .regex(/^[A-Za-z0-9-]{1,100}$/, "must be a header name, such as fly-client-ip")
      .transform((name) => name.toLowerCase())
      .optional(),
  ),
  INSTALLATION_SYNC_MINUTES: integer(0, 10_080, 15),
  ...SANDBOX_LIMIT_VARS,
  PUBLIC_URL: url(/^https?:$/, "must be an http(s) URL such as https://vmpilot.example.com"),
  NETWORK_ALLOW_PRIVATE: z.preprocess(
    blankToUndefined,
    z
      .string()
      .transform((value) =>
        value
          .split(",")
          .map((range) => range.trim())
          .filter(Boolean),
      )
      .pipe(
        z.array(
          z
            .string()
            .refine(
              (range) => parseAddressRange(range) !== undefined,
              "must be comma-separated address ranges such as 10.1.0.0/16,fd00::/8",
            ),
        ),
      )
      .default([]),
  ),
  ALLOWED_USERS: z.preprocess(
    blankToUndefined,
    z
      .string()
      .transform((value) =>
        value
          .split(",")
          .map((user) => user.trim())
          .filter(Boolean),
      )
      .pipe(z.array(z.string().regex(NAME, "must be comma-separated GitHub logins")))
      .default([]),
  ),
});

type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  /** Unset on first run: the server then shows Probot's setup page instead of working. */
  appId?: number;
  privateKey?: string;
  webhookSecret?: string;
  webhookProxyUrl?: string;
  databaseUrl?: string;
  dataDir: string;
  logLevel: LogLevel;
  logFormat: "json" | "pretty";
  anthropicApiKey?: string;
  /** OpenAI-compatible model servers (OPENAI_*, OPENROUTER_API_KEY, OLLAMA_BASE_URL, VMPILOT_PROVIDERS). */
  providers: ProviderTable;
  /** VMPILOT_MODEL: the model of repositories that name none. */
  model: string;
  host: string;
  port: number;
  /** GitHub REST API base, e.g. https://api.github.com or https://ghe.example.com/api/v3. */
  baseUrl: string;
  label: string;
  command: string;
  workerConcurrency: number;
  /** How many repositories keep a ready checkout for their next job (0: none). */
  spareCheckouts: number;
  /** Where jobs' commands run: a bubblewrap sandbox, or the workspace agent inside one. */
  workspaceProvider: Exclude<ProviderName, "host">;
  /** For repositories that ask for `isolation: vm` while workspaceProvider is not a VM. */
  vmProvider: VmProviderName | undefined;
  /** Started VMs each worker process keeps ready (VM providers only). */
  warmPool: number;
  /** On SIGTERM, how long running jobs may finish before they are handed back to the queue. */
  shutdownDrainSeconds: number;
  /** Where job pages (/jobs/:id) are reachable by people reading the comments. */
  publicUrl: string;
  allowedUsers: string[];
  /** Loopback/private/link-local ranges the sandbox proxy may reach anyway; default none. */
  networkAllowPrivate: string[];
  sandboxLimits: SandboxLimits;
  /** Bearer token for GET /metrics; unset, there is no /metrics. */
  metricsToken?: string;
  /** The chat face's operator key (any model); unset, only personal keys from /keys work. */
  apiKey?: string;
  /** Chat-face requests per key per minute. */
  chatRatePerMinute: number;
  /** The header a trusted proxy in front sets to the client's address; unset, the socket's. */
  clientAddressHeader?: string;
  /** How often workers reconcile the installations with GitHub, besides at start; 0: never. */
  installationSyncMinutes: number;
  production: boolean;
  /** The app's OAuth client, for signing in to the web pages; null when not configured. */
  oauth: { clientId: string; clientSecret: string } | null;
  /** Signs web session cookies; unset, one is made and kept in the database (app_secrets). */
  sessionSecret: string | undefined;
  /** GitHub's web address (OAuth, links): https://github.com or the Enterprise host. */
  githubWebUrl: string;
}

export type ConfigResult = { config: Config } | { problems: string[] };

/** Untyped on purpose: the point is to check values Probot's ProcessEnv typing would reject. */
export type Env = Readonly<Record<string, string | undefined>>;

export function loadConfig(env: Env = process.env, cwd = process.cwd()): ConfigResult {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    return {
      // The variable, not the position inside it (ALLOWED_USERS, not ALLOWED_USERS.1).
      problems: parsed.error.issues.map((issue) => `${String(issue.path[0])}: ${issue.message}`),
    };
  }
  const e = parsed.data;
  const problems: string[] = [];
  const production = e.NODE_ENV === "production";
  let privateKey: string | undefined;
  try {
    privateKey = readPrivateKey(e.PRIVATE_KEY, e.PRIVATE_KEY_PATH, cwd);
  } catch (error) {
    problems.push((error as Error).message);
  }
  if (e.APP_ID === undefined) {
    if (production) problems.push("APP_ID: is required in production (NODE_ENV=production)");
  } else {
    if (!privateKey && problems.length === 0) {
      problems.push("PRIVATE_KEY: is required when APP_ID is set (or set PRIVATE_KEY_PATH)");
    }
    if (!e.WEBHOOK_SECRET) problems.push("WEBHOOK_SECRET: is required when APP_ID is set");
  }
  const loaded = loadProviders(env);
  const providers = "providers" in loaded ? loaded.providers : new Map();
  if ("problems" in loaded) problems.push(...loaded.problems);
  const model = e.VMPILOT_MODEL ?? DEFAULT_MODEL;
  try {
    routeModel(model, providers);
  } catch (error) {
    problems.push(`VMPILOT_MODEL: ${(error as Error).message}`);
  }
  if (Boolean(e.GITHUB_CLIENT_ID) !== Boolean(e.GITHUB_CLIENT_SECRET)) {
    problems.push("GITHUB_CLIENT_SECRET: GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET go together");
  }
  if (problems.length > 0) return { problems };
  const baseUrl = e.GHE_HOST
    ? `${e.GHE_PROTOCOL}://${e.GHE_HOST}/api/v3`
    : "https://api.github.com";
  const publicHost = e.HOST === "0.0.0.0" || e.HOST === "::" ? "localhost" : e.HOST;
  return {
    config: {
      appId: e.APP_ID,
      privateKey,
      webhookSecret: e.WEBHOOK_SECRET,
      webhookProxyUrl: e.WEBHOOK_PROXY_URL,
      databaseUrl: e.DATABASE_URL,
      dataDir: resolve(cwd, e.DATA_DIR),
      logLevel: e.LOG_LEVEL,
      logFormat: e.LOG_FORMAT ?? (production ? "json" : "pretty"),
      anthropicApiKey: e.ANTHROPIC_API_KEY,
      providers,
      model,
      host: e.HOST,
      port: e.PORT,
      baseUrl,
      label: e.VMPILOT_LABEL,
      command: e.VMPILOT_COMMAND,
      workerConcurrency: e.WORKER_CONCURRENCY,
      spareCheckouts: e.SPARE_CHECKOUTS,
      workspaceProvider: e.WORKSPACE_PROVIDER,
      vmProvider: e.WORKSPACE_VM_PROVIDER,
      warmPool: e.WORKSPACE_WARM_POOL,
      shutdownDrainSeconds: e.SHUTDOWN_DRAIN_SECONDS,
      publicUrl: (e.PUBLIC_URL ?? `http://${publicHost}:${e.PORT}`).replace(/\/+$/, ""),
      allowedUsers: e.ALLOWED_USERS,
      networkAllowPrivate: e.NETWORK_ALLOW_PRIVATE,
      metricsToken: e.METRICS_TOKEN,
      apiKey: e.VMPILOT_API_KEY,
      chatRatePerMinute: e.CHAT_RATE_PER_MINUTE,
      clientAddressHeader: e.CLIENT_ADDRESS_HEADER,
      installationSyncMinutes: e.INSTALLATION_SYNC_MINUTES,
      sandboxLimits: toLimits(e),
      production,
      oauth:
        e.GITHUB_CLIENT_ID && e.GITHUB_CLIENT_SECRET
          ? { clientId: e.GITHUB_CLIENT_ID, clientSecret: e.GITHUB_CLIENT_SECRET }
          : null,
      sessionSecret: e.SESSION_SECRET,
      githubWebUrl: e.GHE_HOST ? `${e.GHE_PROTOCOL}://${e.GHE_HOST}` : "https://github.com",
    },
  };
}

/** Reads the key the way Probot accepts it: PEM text, PEM with "\n" escapes, base64, or a file. */
function readPrivateKey(
  inline: string | undefined,
  path: string | undefined,
  cwd: string,
): string | undefined {
  let pem: string;
  let source: string;
  if (inline) {
    source = "PRIVATE_KEY";
    pem = inline.includes("-----BEGIN")
      ? inline.replaceAll("\\n", "\n")
      : Buffer.from(inline, "base64").toString("utf8");
  } else if (path) {
    source = "PRIVATE_KEY_PATH";
    const file = resolve(cwd, path);
    if (!existsSync(file)) throw new Error(`PRIVATE_KEY_PATH: no file at ${file}`);
    pem = readFileSync(file, "utf8");
  } else {
    return undefined;
  }
  try {
    createPrivateKey(pem);
  } catch {
    throw new Error(
      `${source}: is not a PEM-encoded private key (download it from the app settings)`,
    );
  }
  return pem;
}

/**
 * Loads `.env` (written by Probot's setup flow) into `env`; variables already set win, as with
 * dotenv.
 */
export function loadDotEnv(
  env: Record<string, string | undefined> = process.env,
  cwd = process.cwd(),
): void {
  const file = resolve(cwd, ".env");
  if (!existsSync(file)) return;
  for (const [key, value] of Object.entries(parseEnv(readFileSync(file, "utf8")))) {
    if (env[key] === undefined) env[key] = value;
  }
}
