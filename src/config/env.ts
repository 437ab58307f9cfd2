// The process environment, validated once at startup. Every problem is reported, one per line.
import { createPrivateKey } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseEnv } from "node:util";
import { z } from "zod";
import { parseAddressRange } from "./address-policy.ts";
import { loadMcpSecrets, loadMcpServers, type McpSecret, type McpServerSetting } from "./mcp.ts";
import { routeModel } from "./model-route.ts";
import { DEFAULT_MODEL } from "./models.ts";
import { loadProviders, type ProviderTable } from "./providers.ts";
import { TRACING, type TracingConfig, tracingConfig } from "./tracing.ts";
import {
  DEFAULT_LIMITS,
  DEFAULT_WORKSPACE,
  ENGINES,
  fromOldProvider,
  OLD_PROVIDERS,
  type SandboxLimits,
  type WorkspaceChoice,
} from "./workspace.ts";

const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

const integer = (min: number, max: number, fallback: number) =>
  z
    .string()
    .regex(/^\d+$/, `must be an integer from ${min} to ${max}`)
    .transform(Number)
    .pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`))
    .default(fallback);
/** A comma-separated list, blanks dropped, each item checked by `item`; default empty. */
const commaList = (item: z.ZodString) =>
  z
    .string()
    .transform((value) =>
      value
        .split(",")
        .map((entry) => entry.trim())
        .filter(Boolean),
    )
    .pipe(z.array(item))
    .default([]);
const url = (protocols: RegExp, hint: string) =>
  z
    .string()
    .refine((value) => URL.canParse(value) && protocols.test(new URL(value).protocol), hint)
    .optional();

/** Fields, each read from one variable: `field: [VARIABLE, schema]`. Problems follow its order. */
type Table = Record<string, readonly [variable: string, schema: z.ZodType]>;
type Shape<T extends Table> = { [F in keyof T]: T[F][1] };

/**
 * The fields of `table` from their variables, a blank one counting as unset; or undefined, with
 * one problem per variable added to `problems`, naming the variable, not the field.
 */
function readTable<T extends Table>(table: T, env: Env, problems: string[]) {
  const entries = Object.entries(table);
  // Object.fromEntries knows no keys: the per-field types are the table's.
  const shape = Object.fromEntries(
    entries.map(([field, [, schema]]) => [field, schema]),
  ) as Shape<T>;
  const input = Object.fromEntries(
    entries.map(([field, [variable]]) => [
      field,
      env[variable]?.trim() ? env[variable] : undefined,
    ]),
  );
  const parsed = z.object(shape).safeParse(input);
  if (parsed.success) return parsed.data;
  // The variable, not the position inside it (ALLOWED_USERS, not ALLOWED_USERS.1).
  for (const issue of parsed.error.issues) {
    problems.push(`${table[String(issue.path[0])]?.[0]}: ${issue.message}`);
  }
  return undefined;
}

const SANDBOX_LIMITS = {
  processes: ["SANDBOX_MAX_PROCESSES", integer(16, 1_000_000, DEFAULT_LIMITS.processes)],
  memoryMb: ["SANDBOX_MAX_MEMORY_MB", integer(64, 10_000_000, DEFAULT_LIMITS.memoryMb)],
  fileMb: ["SANDBOX_MAX_FILE_MB", integer(1, 10_000_000, DEFAULT_LIMITS.fileMb)],
  diskMb: ["SANDBOX_MAX_DISK_MB", integer(16, 100_000_000, DEFAULT_LIMITS.diskMb)],
} satisfies Table;

/** The sandbox limits alone, for the CLI, which needs no GitHub App; one problem per variable. */
export function loadSandboxLimits(env: Env): { limits: SandboxLimits } | { problems: string[] } {
  const problems: string[] = [];
  const limits = readTable(SANDBOX_LIMITS, env, problems);
  return limits ? { limits } : { problems };
}

/** The fields of Config read as they are from one variable each. */
const FIELDS = {
  /** Signs web session cookies; unset, one is made and kept in the database (app_secrets). */
  sessionSecret: [
    "SESSION_SECRET",
    z.string().min(32, "must be at least 32 characters (e.g. openssl rand -hex 32)").optional(),
  ],
  /** Unset on first run: the server then shows Probot's setup page instead of working. */
  appId: [
    "APP_ID",
    z.string().regex(/^\d+$/, "must be the numeric GitHub App id").transform(Number).optional(),
  ],
  webhookSecret: ["WEBHOOK_SECRET", z.string().optional()],
  webhookProxyUrl: [
    "WEBHOOK_PROXY_URL",
    url(/^https?:$/, "must be an http(s) URL, e.g. https://smee.io/abc"),
  ],
  databaseUrl: ["DATABASE_URL", url(/^postgres(ql)?:$/, "must be a postgres:// URL")],
  logLevel: [
    "LOG_LEVEL",
    z
      .string()
      .toLowerCase()
      .pipe(z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(", ")}` }))
      .default("info"),
  ],
  anthropicApiKey: ["ANTHROPIC_API_KEY", z.string().optional()],
  host: ["HOST", z.string().default("localhost")],
  port: ["PORT", integer(0, 65535, 3000)],
  label: ["VMPILOT_LABEL", z.string().max(50).default("vmpilot")],
  command: [
    "VMPILOT_COMMAND",
    z
      .string()
      .regex(/^[a-z][a-z0-9-]{0,30}$/, "must be a lowercase word such as vmpilot")
      .default("vmpilot"),
  ],
  workerConcurrency: ["WORKER_CONCURRENCY", integer(1, 100, 2)],
  /** How many repositories keep a ready checkout for their next job (0: none). */
  spareCheckouts: ["SPARE_CHECKOUTS", integer(0, 10_000, 20)],
  /** Started VMs each worker process keeps ready (with WORKSPACE_ISOLATION=vm only). */
  warmPool: ["WORKSPACE_WARM_POOL", integer(0, 50, 0)],
  /** On SIGTERM, how long running jobs may finish before they are handed back to the queue. */
  shutdownDrainSeconds: ["SHUTDOWN_DRAIN_SECONDS", integer(1, 3600, 30)],
  /** Bearer token for GET /metrics; unset, there is no /metrics. */
  metricsToken: [
    "METRICS_TOKEN",
    z.string().min(16, "must be at least 16 characters (a bearer token for /metrics)").optional(),
  ],
  /** The chat face's operator key (any model); unset, only personal keys from /keys work. */
  apiKey: [
    "VMPILOT_API_KEY",
    z.string().min(32, "must be at least 32 characters (the chat face's operator key)").optional(),
  ],
  /** Chat-face requests per person (all their keys) per minute. */
  chatRatePerMinute: ["CHAT_RATE_PER_MINUTE", integer(1, 100_000, 60)],
  /** The header a trusted proxy in front sets to the client's address; unset, the socket's. */
  clientAddressHeader: [
    "CLIENT_ADDRESS_HEADER",
    z
      .string()
      .regex(/^[A-Za-z0-9-]{1,100}$/, "must be a header name, such as fly-client-ip")
      .transform((name) => name.toLowerCase())
      .optional(),
  ],
  /** How often workers reconcile the installations with GitHub, besides at start; 0: never. */
  installationSyncMinutes: ["INSTALLATION_SYNC_MINUTES", integer(0, 10_080, 15)],
  /** Loopback/private/link-local ranges the sandbox proxy may reach anyway; default none. */
  networkAllowPrivate: [
    "NETWORK_ALLOW_PRIVATE",
    commaList(
      z
        .string()
        .refine(
          (range) => parseAddressRange(range) !== undefined,
          "must be comma-separated address ranges such as 10.1.0.0/16,fd00::/8",
        ),
    ),
  ],
  allowedUsers: [
    "ALLOWED_USERS",
    commaList(z.string().regex(NAME, "must be comma-separated GitHub logins")),
  ],
} satisfies Table;

/** The variables Derived's fields are computed from. */
const INPUTS = {
  oauthClientId: ["GITHUB_CLIENT_ID", z.string().optional()],
  oauthClientSecret: ["GITHUB_CLIENT_SECRET", z.string().optional()],
  nodeEnv: ["NODE_ENV", z.string().optional()],
  privateKey: ["PRIVATE_KEY", z.string().optional()],
  privateKeyPath: ["PRIVATE_KEY_PATH", z.string().optional()],
  dataDir: ["DATA_DIR", z.string().default("./data")],
  logFormat: ["LOG_FORMAT", z.enum(["json", "pretty"], "must be json or pretty").optional()],
  model: ["VMPILOT_MODEL", z.string().optional()],
  gheHost: [
    "GHE_HOST",
    z
      .string()
      .regex(/^[A-Za-z0-9.-]+(:\d+)?$/, "must be a host name such as github.example.com")
      .optional(),
  ],
  gheProtocol: [
    "GHE_PROTOCOL",
    z.enum(["http", "https"], "must be http or https").default("https"),
  ],
  publicUrl: [
    "PUBLIC_URL",
    url(/^https?:$/, "must be an http(s) URL such as https://vmpilot.example.com"),
  ],
  isolation: ["WORKSPACE_ISOLATION", z.enum(["sandbox", "vm"], "must be sandbox or vm").optional()],
  engine: ["WORKSPACE_ENGINE", z.enum(ENGINES, "must be local, fly or kubernetes").optional()],
  oldProvider: [
    "WORKSPACE_PROVIDER",
    z
      .enum(
        OLD_PROVIDERS.filter((name) => name !== "host"),
        "must be sandbox, agent, fly or kubernetes",
      )
      .optional(),
  ],
  oldVmProvider: [
    "WORKSPACE_VM_PROVIDER",
    z.enum(["fly", "kubernetes"], "must be fly or kubernetes").optional(),
  ],
} satisfies Table;

/** Every variable read here (the model providers' are providers.ts's), for checking the docs. */
export const VARIABLES = [
  ...[FIELDS, INPUTS, SANDBOX_LIMITS, TRACING].flatMap((table) =>
    Object.values(table).map(([variable]) => variable),
  ),
  // Read by mcp.ts, which the CLI uses too.
  "MCP_SECRETS",
  "MCP_SERVERS",
];

/** Config's fields computed from the variables rather than read as they are. */
interface Derived {
  privateKey?: string;
  dataDir: string;
  logFormat: "json" | "pretty";
  /** OpenAI-compatible model servers (OPENAI_*, OPENROUTER_API_KEY, OLLAMA_BASE_URL, VMPILOT_PROVIDERS). */
  providers: ProviderTable;
  /** VMPILOT_MODEL: the model of repositories that name none. */
  model: string;
  /** GitHub REST API base, e.g. https://api.github.com or https://ghe.example.com/api/v3. */
  baseUrl: string;
  /** Where job pages (/jobs/:id) are reachable by people reading the comments. */
  publicUrl: string;
  sandboxLimits: SandboxLimits;
  /** WORKSPACE_ISOLATION: the least isolation of every job; WORKSPACE_ENGINE: where vm runs. */
  workspace: WorkspaceChoice;
  production: boolean;
  /** The app's OAuth client, for signing in to the web pages; null when not configured. */
  oauth: { clientId: string; clientSecret: string } | null;
  /** GitHub's web address (OAuth, links): https://github.com or the Enterprise host. */
  githubWebUrl: string;
  /** MCP_SECRETS: what MCP servers' headers may name, with their values. */
  mcpSecrets: McpSecret[];
  /** MCP_SERVERS: the operator's MCP servers, which every job gets. */
  mcpServers: Record<string, McpServerSetting>;
  /** OTLP export of traces (OTEL_EXPORTER_OTLP_ENDPOINT and friends); unset, none. */
  tracing?: TracingConfig;
}

export type Config = z.output<z.ZodObject<Shape<typeof FIELDS>>> & Derived;

/** Warnings are said once at start: the old names of variables that were renamed. */
export type ConfigResult = { config: Config; warnings: string[] } | { problems: string[] };

/** Untyped on purpose: the point is to check values Probot's ProcessEnv typing would reject. */
export type Env = Readonly<Record<string, string | undefined>>;

export function loadConfig(env: Env = process.env, cwd = process.cwd()): ConfigResult {
  const problems: string[] = [];
  const fields = readTable(FIELDS, env, problems);
  const i = readTable(INPUTS, env, problems);
  const sandboxLimits = readTable(SANDBOX_LIMITS, env, problems);
  const tracing = readTable(TRACING, env, problems);
  if (!fields || !i || !sandboxLimits || !tracing) return { problems };
  const production = i.nodeEnv === "production";
  let privateKey: string | undefined;
  try {
    privateKey = readPrivateKey(i.privateKey, i.privateKeyPath, cwd);
  } catch (error) {
    problems.push((error as Error).message);
  }
  if (fields.appId === undefined) {
    if (production) problems.push("APP_ID: is required in production (NODE_ENV=production)");
  } else {
    if (!privateKey && problems.length === 0) {
      problems.push("PRIVATE_KEY: is required when APP_ID is set (or set PRIVATE_KEY_PATH)");
    }
    if (!fields.webhookSecret) problems.push("WEBHOOK_SECRET: is required when APP_ID is set");
  }
  const loaded = loadProviders(env);
  const providers = "providers" in loaded ? loaded.providers : new Map();
  if ("problems" in loaded) problems.push(...loaded.problems);
  const model = i.model ?? DEFAULT_MODEL;
  try {
    routeModel(model, providers);
  } catch (error) {
    problems.push(`VMPILOT_MODEL: ${(error as Error).message}`);
  }
  if (Boolean(i.oauthClientId) !== Boolean(i.oauthClientSecret)) {
    problems.push("GITHUB_CLIENT_SECRET: GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET go together");
  }
  const workspace = workspaceChoice(i, problems);
  const mcp = loadMcp(env, problems);
  if (problems.length > 0 || !mcp) return { problems };
  const githubWebUrl = i.gheHost ? `${i.gheProtocol}://${i.gheHost}` : "https://github.com";
  const publicHost = fields.host === "0.0.0.0" || fields.host === "::" ? "localhost" : fields.host;
  return {
    config: {
      ...fields,
      privateKey,
      dataDir: resolve(cwd, i.dataDir),
      logFormat: i.logFormat ?? (production ? "json" : "pretty"),
      providers,
      model,
      baseUrl: i.gheHost ? `${githubWebUrl}/api/v3` : "https://api.github.com",
      publicUrl: (i.publicUrl ?? `http://${publicHost}:${fields.port}`).replace(/\/+$/, ""),
      sandboxLimits,
      workspace: workspace.choice,
      production,
      oauth:
        i.oauthClientId && i.oauthClientSecret
          ? { clientId: i.oauthClientId, clientSecret: i.oauthClientSecret }
          : null,
      githubWebUrl,
      mcpSecrets: mcp.secrets,
      mcpServers: mcp.servers,
      tracing: tracingConfig(tracing),
    },
    warnings: workspace.warnings,
  };
}

/** MCP_SECRETS, then MCP_SERVERS, whose headers may name only those; undefined with problems. */
function loadMcp(env: Env, problems: string[]) {
  const secrets = loadMcpSecrets(env);
  if ("problems" in secrets) {
    problems.push(...secrets.problems);
    return undefined;
  }
  const servers = loadMcpServers(env, secrets.secrets);
  if ("problems" in servers) {
    problems.push(...servers.problems);
    return undefined;
  }
  return { secrets: secrets.secrets, servers: servers.servers };
}

type Inputs = z.output<z.ZodObject<Shape<typeof INPUTS>>>;

/**
 * WORKSPACE_ISOLATION and WORKSPACE_ENGINE, or what the variables they replace meant, with one
 * warning naming the new ones. WORKSPACE_PROVIDER named both at once, and its "agent" read as the
 * model's loop rather than the workspace agent.
 */
function workspaceChoice(i: Inputs, problems: string[]) {
  const given: Partial<WorkspaceChoice> = { isolation: i.isolation, engine: i.engine };
  const warnings: string[] = [];
  if (i.oldProvider !== undefined || i.oldVmProvider !== undefined) {
    if (i.isolation !== undefined || i.engine !== undefined) {
      const old = i.oldProvider === undefined ? "WORKSPACE_VM_PROVIDER" : "WORKSPACE_PROVIDER";
      problems.push(
        `${old}: replaced by WORKSPACE_ISOLATION and WORKSPACE_ENGINE, which are set too: drop ${old}`,
      );
    }
    const old = i.oldProvider ? fromOldProvider(i.oldProvider) : DEFAULT_WORKSPACE;
    given.isolation = old.isolation;
    given.engine = old.engine === "local" ? (i.oldVmProvider ?? old.engine) : old.engine;
    const was = [
      i.oldProvider && `WORKSPACE_PROVIDER=${i.oldProvider}`,
      i.oldVmProvider && `WORKSPACE_VM_PROVIDER=${i.oldVmProvider}`,
    ].filter(Boolean);
    warnings.push(
      `${was.join(" and ")} ${was.length > 1 ? "are" : "is"} read as WORKSPACE_ISOLATION=${given.isolation} WORKSPACE_ENGINE=${given.engine}: set those instead (the old names will go)`,
    );
  }
  const choice: WorkspaceChoice = {
    isolation: given.isolation ?? DEFAULT_WORKSPACE.isolation,
    engine: given.engine ?? DEFAULT_WORKSPACE.engine,
  };
  if (choice.isolation === "vm" && choice.engine === "local") {
    problems.push("WORKSPACE_ISOLATION: vm needs WORKSPACE_ENGINE set to fly or kubernetes");
  }
  return { choice, warnings };
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
