import { isIP } from "node:net";
import { LineCounter, parseDocument } from "yaml";
import { z } from "zod";
import { compileAddressPolicy } from "./address-policy.ts";
import { cronProblem } from "./cron.ts";
import {
  loadMcpSecrets,
  type McpSecret,
  type McpServerSetting,
  mcpSchema,
  mergeMcp,
  secretProblems,
} from "./mcp.ts";
import { DEFAULT_MODEL } from "./models.ts";
import { lineOf } from "./yaml-lines.ts";

/** Where a resolved setting came from, lowest precedence first. */
export type SettingSource = "default" | "page" | "file";

export interface ConfigIssue {
  /** Dotted key path, e.g. `network.allow[1]`; empty for the whole document. */
  path: string;
  message: string;
  /** 1-based line in the file, when the issue came from parsing one (parseRepoConfig). */
  line?: number;
  /** The file it is in, when not `.github/vmpilot.yml`: a skill's SKILL.md. */
  file?: string;
}

export type ConfigResult =
  | { ok: true; config: RepoConfig }
  | { ok: false; issues: ConfigIssue[]; message: string };

/** The longest a repository may let one job run; the queue keeps attempts alive this long. */
export const MAX_TIMEOUT_MINUTES = 240;

const login = z
  .string()
  .regex(/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$/, "must be a GitHub user name (letters, digits, -)");
// host, optionally with a leading "*." wildcard and a port: "registry.npmjs.org", "*.pypi.org:443".
const host = z
  .string()
  .regex(
    /^(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*(?::[0-9]{1,5})?$/,
    "must be a host name with an optional port, like registry.npmjs.org or *.example.com:443",
  )
  .superRefine((entry, ctx) => {
    const kind = internalEntry(entry);
    if (kind) {
      ctx.addIssue({
        code: "custom",
        message: `must not be an internal address (${kind}): the sandbox may not reach the worker's own machine or network`,
      });
    }
  });
// The sandbox proxy refuses these whatever the file says; private ranges (10/8...) pass here since
// the operator may open them with NETWORK_ALLOW_PRIVATE, and names are checked once resolved.
const addressKind = compileAddressPolicy();
const NEVER_LISTED = new Set(["unspecified", "loopback", "link-local", "multicast", "reserved"]);

/** Why a literal entry names the worker's own machine or network, or undefined. */
function internalEntry(entry: string): string | undefined {
  const name = entry.replace(/:\d+$/, "").toLowerCase().replace(/\.$/, "");
  if (name === "localhost" || name.endsWith(".localhost")) return "loopback";
  const kind = isIP(name) ? addressKind(name) : undefined;
  return kind && NEVER_LISTED.has(kind) ? kind : undefined;
}

const money = z.number("must be a number").positive("must be greater than 0").max(100_000);
const networkShape = {
  allow: z
    .array(host)
    .max(100)
    .describe("Hosts the workspace may reach (host or host:port).")
    .optional(),
};

const ciShape = {
  autofix: z
    .boolean()
    .describe(
      "Fix a check or commit status that fails on the commit vmpilot pushed last to its pull request.",
    )
    .optional(),
  maxFixAttempts: z
    .int("must be a whole number")
    .min(0, "must be at least 0")
    .max(20, "must be at most 20")
    .describe("Most CI fix attempts per pull request; 0 turns them off.")
    .optional(),
  graceMinutes: z
    .int("must be a whole number")
    .min(0, "must be at least 0")
    .max(1440, "must be at most 1440")
    .describe(
      "Without CI: minutes to wait for a check suite or commit status on vmpilot's push before its pull request counts as ready.",
    )
    .optional(),
};

const reviewShape = {
  beforePullRequest: z
    .boolean()
    .describe(
      "Before vmpilot opens or updates its pull request, the model takes a second look at the whole diff and fixes what it finds.",
    )
    .optional(),
};

/** Where lessons from review are kept by default (docs/memory.md). */
const MEMORY_PATH = ".github/vmpilot/memory.md";

const memoryShape = {
  enabled: z
    .boolean()
    .describe(
      "Keep lessons from review in a file of the repository, proposed in a pull request from vmpilot/memory, and show them to every job.",
    )
    .optional(),
  path: z
    .string()
    .max(200, "must be at most 200 characters")
    .regex(
      /^(?!\.git\/)(?!.*(?:^|\/)\.\.?(?:\/|$))[A-Za-z0-9._-]+(?:\/[A-Za-z0-9._-]+)*$/,
      "must be a path in the repository, like .github/vmpilot/memory.md",
    )
    .describe(`The lessons' file in the repository; default ${MEMORY_PATH}.`)
    .optional(),
};

/** The events an automation can start on. */
const AUTOMATION_EVENTS = ["issues.opened"] as const;

const automationSchema = z
  .strictObject({
    name: z
      .string()
      .regex(
        /^[a-z0-9][a-z0-9_-]{0,49}$/,
        "must be lowercase letters, digits, - or _ (at most 50), like weekly-deps",
      )
      .describe("Names the automation in its jobs, branches and schedules; unique in the file."),
    schedule: z
      .string()
      .superRefine((expression, ctx) => {
        const problem = cronProblem(expression);
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      })
      .describe(
        'When to run, as a five-field cron expression in UTC, e.g. "0 6 * * 1" (Mondays 06:00).',
      )
      .optional(),
    on: z
      .enum(AUTOMATION_EVENTS, "must be issues.opened")
      .describe("The GitHub event to run on: issues.opened.")
      .optional(),
    prompt: z
      .string()
      .trim()
      .min(1, "must not be empty")
      .max(4000, "must be at most 4000 characters")
      .describe("What the agent is asked to do on each run."),
    mode: z
      .enum(["fix", "triage"], "must be fix or triage")
      .describe(
        "fix (default): change the code and open a pull request when there are changes. triage (with on: issues.opened): apply labels from the repository's labels and post one comment; never changes code.",
      )
      .optional(),
    authors: z
      .enum(["write", "any"], "must be write or any")
      .describe(
        "With on: whose issues start it: write (default) only people who may trigger vmpilot; any: everyone's, only with mode: triage and labels.",
      )
      .optional(),
    labels: z
      .array(z.string().trim().min(1, "must not be empty").max(50, "must be at most 50 characters"))
      .min(1, "must name at least one label")
      .max(50, "must be at most 50")
      .describe(
        "With mode: triage: the only labels it may apply (of the repository's). Required with authors: any.",
      )
      .optional(),
  })
  .superRefine((automation, ctx) => {
    const issue = (message: string, key?: string) =>
      ctx.addIssue({ code: "custom", message, ...(key ? { path: [key] } : {}) });
    if ((automation.schedule === undefined) === (automation.on === undefined)) {
      issue("must have exactly one trigger: schedule or on");
    }
    if (automation.mode === "triage" && automation.on === undefined) {
      issue("triage works on an issue: use it with on: issues.opened", "mode");
    }
    if (automation.authors !== undefined && automation.on === undefined) {
      issue("only applies to automations with on:", "authors");
    }
    if (automation.labels !== undefined && automation.mode !== "triage") {
      issue("only applies to automations with mode: triage", "labels");
    }
    // Anyone may open an issue, and its text steers the run: a stranger's issue may only get
    // labels the file names, and a comment; never code pushed.
    if (automation.authors === "any" && automation.mode !== "triage") {
      issue("any lets anyone's issue steer the run: only with mode: triage", "authors");
    }
    if (automation.authors === "any" && automation.labels === undefined) {
      issue("any needs labels: the labels a stranger's issue may get", "authors");
    }
  });

export type Automation = z.infer<typeof automationSchema>;

/**
 * `.github/vmpilot.yml` and the settings page share this schema. Every key is optional so that
 * each layer (page, file) only overrides what it names.
 */
const repoConfigSchema = z
  .strictObject({
    enabled: z.boolean().describe("Run vmpilot on this repository."),
    label: z
      .string()
      .trim()
      .min(1, "must not be empty")
      .max(50, "must be at most 50 characters")
      .describe("Issue label that asks vmpilot to work on an issue."),
    triggerPolicy: z
      .enum(["write", "allow-list"], "must be write or allow-list")
      .describe(
        "write: anyone with write access plus allowedUsers may trigger; allow-list: only allowedUsers.",
      ),
    allowedUsers: z
      .array(login)
      .max(200)
      .describe(
        "GitHub users who may trigger vmpilot in addition to (or, with allow-list, instead of) writers.",
      ),
    model: z
      .string()
      .regex(
        /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,149}$/,
        "must be a model id like claude-sonnet-5-5, openai/gpt-5.1 or ollama/qwen3-coder:30b",
      )
      .describe(
        "Model id: claude-… (Anthropic), or <provider>/<model> for an OpenAI-compatible provider the operator configured.",
      ),
    maxSteps: z
      .int("must be a whole number")
      .min(1, "must be at least 1")
      .max(500, "must be at most 500")
      .describe("Most agent steps (requests to the model) per job."),
    maxCostUsd: money.describe("Most a single job may spend, in US dollars."),
    timeoutMinutes: z
      .int("must be a whole number")
      .min(1, "must be at least 1")
      .max(MAX_TIMEOUT_MINUTES, `must be at most ${MAX_TIMEOUT_MINUTES}`)
      .describe("Most minutes the agent may work on a single job."),
    maxDailyCostUsd: money.describe(
      "Most all jobs of this repository may spend per day, in US dollars.",
    ),
    maxMonthlyCostUsdPerUser: money.describe(
      "Most one person may spend per calendar month (UTC), in US dollars, before this repository's jobs and chat turns refuse them: their jobs and chat turns in every repository this vmpilot runs count. Unset: no limit.",
    ),
    setup: z
      .array(z.string().trim().min(1, "must not be empty").max(2000))
      .max(20)
      .describe("Commands run in the workspace before the agent starts, e.g. npm ci."),
    network: z.strictObject(networkShape).partial(),
    isolation: z
      .enum(["sandbox", "vm"], "must be sandbox or vm")
      .describe(
        "The least isolation this repository's jobs get: vm runs each job in a Fly Machine or Kubernetes pod of its own. The operator's stronger choice always applies.",
      ),
    plugins: z
      .array(
        z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, "must be a plugin name like code_review"),
      )
      .max(50)
      .describe("Enabled plugins (folders under plugins/)."),
    publicJobs: z
      .boolean()
      .describe("On a public repository, show job pages to everyone, signed in or not."),
    ci: z.strictObject(ciShape).partial(),
    readyForReview: z
      .boolean()
      .describe(
        "Mark vmpilot's draft pull request ready for review, and ask the requester for a review, once its checks pass.",
      ),
    review: z.strictObject(reviewShape).partial(),
    memory: z
      .union(
        [z.boolean(), z.strictObject(memoryShape).partial()],
        "must be false, true or a mapping",
      )
      .describe("Lessons from review; false turns them off."),
    showCost: z
      .boolean()
      .describe(
        "Show what each job took (model, steps, tokens, cost, time) in its final comment and its pull request's body.",
      ),
    automations: z
      .array(automationSchema)
      .max(20, "must be at most 20")
      .superRefine((automations, ctx) => {
        const seen = new Set<string>();
        for (const [index, { name }] of automations.entries()) {
          if (seen.has(name)) {
            ctx.addIssue({ code: "custom", message: "is used twice", path: [index, "name"] });
          }
          seen.add(name);
        }
      })
      .describe(
        "Runs started by a schedule or an event rather than by a person; each is a job like any other, under the same budget.",
      ),
    mcp: mcpSchema,
  })
  .partial();

export type RepoConfig = z.infer<typeof repoConfigSchema>;

/** Every setting, fully resolved. */
export interface RepoSettings {
  enabled: boolean;
  label: string;
  triggerPolicy: "write" | "allow-list";
  allowedUsers: string[];
  model: string;
  maxSteps: number;
  maxCostUsd: number;
  timeoutMinutes: number;
  maxDailyCostUsd: number;
  /** Null: no limit. */
  maxMonthlyCostUsdPerUser: number | null;
  setup: string[];
  network: { allow: string[] };
  isolation: "sandbox" | "vm";
  plugins: string[];
  publicJobs: boolean;
  ci: { autofix: boolean; maxFixAttempts: number; graceMinutes: number };
  readyForReview: boolean;
  review: { beforePullRequest: boolean };
  memory: { enabled: boolean; path: string };
  showCost: boolean;
  /** The operator's MCP servers (MCP_SERVERS), with the file's added (mergeMcp). */
  mcp: Record<string, McpServerSetting>;
}

export const defaults: RepoSettings = {
  enabled: true,
  label: "vmpilot",
  triggerPolicy: "write",
  allowedUsers: [],
  model: DEFAULT_MODEL,
  maxSteps: 50,
  maxCostUsd: 5,
  timeoutMinutes: 45,
  maxDailyCostUsd: 50,
  maxMonthlyCostUsdPerUser: null,
  setup: [],
  network: { allow: [] },
  isolation: "sandbox",
  plugins: [],
  publicJobs: false,
  ci: { autofix: true, maxFixAttempts: 3, graceMinutes: 10 },
  readyForReview: true,
  review: { beforePullRequest: true },
  memory: { enabled: true, path: MEMORY_PATH },
  showCost: true,
  mcp: {},
};

/** The leaves that resolve independently; a nested one (`ci.autofix`) apart from its siblings. */
export const settingKeys = [
  "enabled",
  "label",
  "triggerPolicy",
  "allowedUsers",
  "model",
  "maxSteps",
  "maxCostUsd",
  "timeoutMinutes",
  "maxDailyCostUsd",
  "maxMonthlyCostUsdPerUser",
  "setup",
  "network.allow",
  "isolation",
  "plugins",
  "publicJobs",
  "ci.autofix",
  "ci.maxFixAttempts",
  "ci.graceMinutes",
  "readyForReview",
  "review.beforePullRequest",
  "memory.enabled",
  "memory.path",
  "showCost",
] as const;
export type SettingKey = (typeof settingKeys)[number];

/** `lineAt`, when given, tells each issue's line from its key path. */
export function checkRepoConfig(
  value: unknown,
  lineAt?: (keys: readonly PropertyKey[]) => number,
): ConfigResult {
  const parsed = repoConfigSchema.safeParse(value ?? {});
  if (parsed.success) return { ok: true, config: parsed.data };
  const issue = (keys: readonly PropertyKey[], message: string): ConfigIssue => ({
    path: formatPath(keys),
    message,
    ...(lineAt ? { line: lineAt(keys) } : {}),
  });
  const issues = parsed.error.issues.flatMap((found): ConfigIssue[] => {
    if (found.code === "unrecognized_keys") {
      return found.keys.map((key) => issue([...found.path, key], "unknown key"));
    }
    // A record's key (an MCP server's name): what is wrong with it is inside.
    if (found.code === "invalid_key") {
      return [issue(found.path, found.issues[0]?.message ?? found.message)];
    }
    // zod's own wording for a wrong type is "Invalid input: expected X, received Y".
    return [issue(found.path, found.message.replace(/^Invalid input: /, ""))];
  });
  return { ok: false, issues, message: describeIssues(issues) };
}

// A real config is a few hundred bytes; the caps keep a hostile file (huge, or an alias bomb that
// expands exponentially) from costing memory and CPU before it is refused.
export const MAX_REPO_CONFIG_BYTES = 64 * 1024;
const MAX_ALIAS_COUNT = 100;

function invalid(message: string, line?: number): ConfigResult {
  const issues = [{ path: "", message, ...(line ? { line } : {}) }];
  return { ok: false, issues, message: describeIssues(issues) };
}

/** The secrets this process's operator lists (MCP_SECRETS), which the file's MCP headers may name. */
function operatorSecrets(): Pick<McpSecret, "name" | "host">[] {
  const loaded = loadMcpSecrets(process.env);
  return "secrets" in loaded ? loaded.secrets : [];
}

/**
 * Parses the text of `.github/vmpilot.yml`. An empty file is an empty config. `secrets`: what
 * MCP servers' headers may name; default the operator's (MCP_SECRETS).
 */
export function parseRepoConfig(
  yamlText: string,
  secrets: readonly Pick<McpSecret, "name" | "host">[] = operatorSecrets(),
): ConfigResult {
  if (Buffer.byteLength(yamlText, "utf8") > MAX_REPO_CONFIG_BYTES) {
    return invalid(`file is larger than ${MAX_REPO_CONFIG_BYTES / 1024} KiB`);
  }
  const lines = new LineCounter();
  const doc = parseDocument(yamlText, { uniqueKeys: true, prettyErrors: true, lineCounter: lines });
  const yamlError = doc.errors[0];
  if (yamlError) {
    const message = yamlError.message.split("\n")[0]?.replace(/:$/, "");
    return invalid(`invalid YAML: ${message}`, yamlError.linePos?.[0].line);
  }
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (error) {
    // yaml throws a ReferenceError when aliases expand past maxAliasCount.
    if (!(error instanceof ReferenceError)) throw error;
    return invalid(`invalid YAML: aliases expand too much (more than ${MAX_ALIAS_COUNT})`);
  }
  if (value !== null && (typeof value !== "object" || Array.isArray(value))) {
    return invalid("must be a mapping of settings", lineOf(doc, lines, []));
  }
  const lineAt = (keys: readonly PropertyKey[]) => lineOf(doc, lines, keys);
  const checked = checkRepoConfig(value, lineAt);
  if (!checked.ok) return checked;
  const issues = secretProblems(checked.config.mcp ?? {}, secrets).map(({ path, message }) => {
    const keys = ["mcp", ...path];
    return { path: formatPath(keys), message, line: lineAt(keys) };
  });
  return issues.length > 0 ? { ok: false, issues, message: describeIssues(issues) } : checked;
}

export interface ResolvedSettings {
  values: RepoSettings;
  sources: Record<SettingKey, SettingSource>;
}

/**
 * Spending caps an administrator sets on the settings page: whoever can commit the repo file may
 * lower them there, never raise them, since the money is not theirs to give.
 */
const CEILINGS: ReadonlySet<SettingKey> = new Set(["maxDailyCostUsd", "maxMonthlyCostUsdPerUser"]);

/**
 * Precedence, lowest first: defaults < page settings < repo file, except that the file cannot
 * raise a ceiling the page set.
 */
export function resolveSettings(layers: {
  defaults?: RepoSettings;
  page?: RepoConfig | null;
  file?: RepoConfig | null;
}): ResolvedSettings {
  const base = layers.defaults ?? defaults;
  const values = structuredClone(base);
  const sources = Object.fromEntries(settingKeys.map((k) => [k, "default"])) as Record<
    SettingKey,
    SettingSource
  >;
  for (const source of ["page", "file"] as const) {
    const layer = layers[source];
    if (!layer) continue;
    for (const key of settingKeys) {
      const value = getSetting(layer, key);
      if (value === undefined) continue;
      if (source === "file" && raises(key, value, layers.page)) continue;
      setSetting(values, key, structuredClone(value));
      sources[key] = source;
    }
  }
  // Only the operator and the file name servers: the settings page has no say in them.
  values.mcp = mergeMcp(base.mcp, layers.file?.mcp);
  return { values, sources };
}

function raises(key: SettingKey, value: unknown, page: RepoConfig | null | undefined): boolean {
  const ceiling = page ? getSetting(page, key) : undefined;
  return CEILINGS.has(key) && typeof ceiling === "number" && !(Number(value) < ceiling);
}

export function getSetting(config: RepoConfig | RepoSettings, key: SettingKey): unknown {
  const [head = "", leaf] = key.split(".");
  const value: unknown = (config as Record<string, unknown>)[head];
  // `memory: false` (or true) is short for `memory: { enabled: false }`.
  if (typeof value === "boolean" && leaf !== undefined)
    return leaf === "enabled" ? value : undefined;
  return leaf === undefined ? value : (value as Record<string, unknown> | undefined)?.[leaf];
}

function setSetting(target: RepoSettings, key: SettingKey, value: unknown): void {
  const [head = "", leaf] = key.split(".");
  const record = target as unknown as Record<string, Record<string, unknown>>;
  if (leaf === undefined) (record as Record<string, unknown>)[head] = value;
  else record[head] = { ...record[head], [leaf]: value };
}

/** A nested setting (`ci.autofix`) as the one-key object it is written as in a config. */
export function settingEntry(key: SettingKey, value: unknown): Record<string, unknown> {
  const [head = "", leaf] = key.split(".");
  return { [head]: leaf === undefined ? value : { [leaf]: value } };
}

/** JSON Schema of `.github/vmpilot.yml`, committed as schema/vmpilot.schema.json for editors. */
export function repoConfigJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(repoConfigSchema, { target: "draft-2020-12", io: "input" });
  return { $schema: schema.$schema, title: "vmpilot repository configuration", ...schema };
}

function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

function describeIssues(issues: ConfigIssue[]): string {
  return issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ");
}

/** The schema's description of a setting, for help texts. */
export function describeSetting(key: SettingKey): string {
  const [head, leaf] = key.split(".");
  const nested: Record<string, Record<string, z.ZodOptional>> = {
    network: networkShape,
    ci: ciShape,
    review: reviewShape,
    memory: memoryShape,
  };
  const field =
    leaf === undefined
      ? repoConfigSchema.shape[key as keyof typeof repoConfigSchema.shape]
      : nested[head ?? ""]?.[leaf];
  return (field && z.globalRegistry.get(field.unwrap())?.description) ?? "";
}
