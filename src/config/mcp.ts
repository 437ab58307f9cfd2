// biome-ignore-all lint/suspicious/noTemplateCurlyInString: ${secrets.NAME} is what vmpilot.yml writes.
// The MCP servers a job's model may use: `mcp:` in `.github/vmpilot.yml`, over the operator's own
// (MCP_SERVERS), and the secrets the operator lets their headers name (MCP_SECRETS). A stdio
// server is a command of the repository's, run in the job's workspace like any other; an HTTP
// server is reached from the worker, through the egress policy. A secret is resolved in the
// worker, for an HTTP server's headers only: never in the workspace, and only the names the
// operator listed, each bound to the host it may be sent to when the operator says so.
import { z } from "zod";

const SERVER_NAME = /^[a-z0-9]+(?:[-_][a-z0-9]+)*$/;
/** MCP's tool names (the specification's characters, and a few more that servers use). */
const TOOL_NAME = /^[A-Za-z0-9_./-]{1,128}$/;
/** An HTTP header's name (RFC 9110's token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$/;
/** What the SDK sets itself, or what would smuggle another request. */
const RESERVED_HEADERS = new Set([
  "host",
  "content-length",
  "content-type",
  "connection",
  "transfer-encoding",
  "upgrade",
  "accept",
  "mcp-session-id",
  "mcp-protocol-version",
  "last-event-id",
]);
const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,99}$/;
const PLACEHOLDER = /\$\{([^}]*)\}/g;
const SECRET_REFERENCE = /^secrets\.([A-Za-z_][A-Za-z0-9_]{0,99})$/;
// host, optionally with a port, as network.allow writes it (without the wildcard).
const HOST =
  /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*(?::[0-9]{1,5})?$/;

/** At most this many servers per job: each may add up to MAX_TOOLS tools to every request. */
const MAX_SERVERS = 20;

const headerValue = z
  .string()
  .max(8000, "must be at most 8000 characters")
  // A line break would end the header and start another.
  .regex(/^[^\r\n\0]*$/, "must be one line")
  .superRefine((value, ctx) => {
    for (const [placeholder, inside = ""] of value.matchAll(PLACEHOLDER)) {
      if (!SECRET_REFERENCE.test(inside)) {
        ctx.addIssue({
          code: "custom",
          message: `${placeholder} is not a secret: only \${secrets.NAME} is replaced, with a secret the operator lists in MCP_SECRETS`,
        });
      }
    }
  });

const serverSchema = z
  .strictObject({
    command: z
      .array(z.string().min(1, "must not be empty").max(2000, "must be at most 2000 characters"))
      .min(1, "must name the program to run")
      .max(100, "must be at most 100 words")
      .describe(
        "A stdio server: the program and its arguments, run in the job's workspace with the checkout as working directory, like any command.",
      )
      .optional(),
    url: z
      .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
      .max(2000, "must be at most 2000 characters")
      .refine((url) => !/^[a-z]+:\/\/[^/]*@/i.test(url), {
        message: "must not hold credentials: put them in headers, as ${secrets.NAME}",
      })
      .describe(
        "A streamable HTTP server, reached from the worker; its host must be in network.allow.",
      )
      .optional(),
    headers: z
      .record(z.string().regex(HEADER_NAME, "must be an HTTP header name"), headerValue)
      .superRefine((headers, ctx) => {
        for (const name of Object.keys(headers)) {
          if (RESERVED_HEADERS.has(name.toLowerCase())) {
            ctx.addIssue({ code: "custom", message: "is set by vmpilot itself", path: [name] });
          }
        }
      })
      .describe(
        "Headers sent to an HTTP server; ${secrets.NAME} stands for a secret the operator lists in MCP_SECRETS.",
      )
      .optional(),
    tools: z
      .array(z.string().regex(TOOL_NAME, "must be a tool name like search or fetch_page"))
      .max(100, "must be at most 100")
      .describe("The server's tools the model may use; default all of them.")
      .optional(),
  })
  .superRefine((server, ctx) => {
    if ((server.command === undefined) === (server.url === undefined)) {
      ctx.addIssue({ code: "custom", message: "must have exactly one of command (stdio) or url" });
    }
    if (server.headers !== undefined && server.url === undefined) {
      ctx.addIssue({
        code: "custom",
        message: "only apply to a server with url",
        path: ["headers"],
      });
    }
  });

export type McpServer = z.infer<typeof serverSchema>;

export const mcpSchema = z
  .record(
    z
      .string()
      .max(30, "must be at most 30 characters")
      .regex(SERVER_NAME, "must be lowercase letters and digits, with single - or _ between"),
    serverSchema,
  )
  .refine((servers) => Object.keys(servers).length <= MAX_SERVERS, {
    message: `must name at most ${MAX_SERVERS} servers`,
  })
  .describe(
    "MCP servers whose tools the model may use, by name: command (stdio, in the workspace) or url (streamable HTTP).",
  );

/** A server as a job gets it: the operator's (MCP_SERVERS) or the repository's file's. */
export type McpServerSetting = McpServer & { from: "operator" | "file" };

/**
 * The operator's servers, with the file's added. A file cannot loosen what the operator set: a
 * server of the operator's name stays the operator's, and the file's `tools` can only narrow it.
 */
export function mergeMcp(
  operator: Readonly<Record<string, McpServerSetting>>,
  file: Readonly<Record<string, McpServer>> | undefined,
): Record<string, McpServerSetting> {
  const merged: Record<string, McpServerSetting> = structuredClone({ ...operator });
  for (const [name, server] of Object.entries(file ?? {})) {
    const own = merged[name];
    if (own?.from !== "operator") {
      merged[name] = { ...structuredClone(server), from: "file" };
      continue;
    }
    if (!server.tools) continue;
    const asked = new Set(server.tools);
    own.tools = (own.tools ?? server.tools).filter((tool) => asked.has(tool));
  }
  return merged;
}

/** A secret the operator lets servers' headers name; `host`: the only host it may be sent to. */
export interface McpSecret {
  name: string;
  value: string;
  host?: string;
}

/**
 * MCP_SECRETS: comma-separated names (`TRACKER_TOKEN`), each optionally bound to the one host it
 * may be sent to (`TRACKER_TOKEN@mcp.tracker.example`); each name's value is the variable of
 * that name. One problem per entry that is not that.
 */
export function loadMcpSecrets(
  env: Readonly<Record<string, string | undefined>>,
): { secrets: McpSecret[] } | { problems: string[] } {
  const problems: string[] = [];
  const secrets: McpSecret[] = [];
  for (const entry of (env.MCP_SECRETS ?? "").split(",")) {
    const text = entry.trim();
    if (!text) continue;
    const [name = "", host, ...rest] = text.split("@");
    if (!SECRET_NAME.test(name) || rest.length > 0 || (host !== undefined && !HOST.test(host))) {
      problems.push(
        `MCP_SECRETS: ${JSON.stringify(text)} is not NAME or NAME@host (like TRACKER_TOKEN@mcp.tracker.example)`,
      );
      continue;
    }
    const value = env[name];
    if (!value) {
      problems.push(`MCP_SECRETS: names ${name}, which is not set`);
      continue;
    }
    secrets.push({ name, value, ...(host !== undefined && { host: host.toLowerCase() }) });
  }
  return problems.length > 0 ? { problems } : { secrets };
}

/** MCP_SERVERS: the operator's servers, as JSON in the shape of vmpilot.yml's `mcp`. */
export function loadMcpServers(
  env: Readonly<Record<string, string | undefined>>,
  secrets: readonly Pick<McpSecret, "name" | "host">[],
): { servers: Record<string, McpServerSetting> } | { problems: string[] } {
  const text = env.MCP_SERVERS?.trim();
  if (!text) return { servers: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { problems: ["MCP_SERVERS: is not JSON"] };
  }
  const parsed = mcpSchema.safeParse(value);
  if (!parsed.success) {
    return {
      problems: parsed.error.issues.map(
        (issue) => `MCP_SERVERS: ${issue.path.map(String).join(".")}: ${issue.message}`,
      ),
    };
  }
  const unknown = secretProblems(parsed.data, secrets);
  if (unknown.length > 0) {
    return {
      problems: unknown.map(
        (problem) => `MCP_SERVERS: ${problem.path.join(".")}: ${problem.message}`,
      ),
    };
  }
  return {
    servers: Object.fromEntries(
      Object.entries(parsed.data).map(([name, server]) => [
        name,
        { ...server, from: "operator" as const },
      ]),
    ),
  };
}

/** The secrets a header value names, in order. */
function secretNames(value: string): string[] {
  return [...value.matchAll(PLACEHOLDER)].flatMap(
    ([, inside = ""]) => SECRET_REFERENCE.exec(inside)?.slice(1) ?? [],
  );
}

/** An address's host, with its port when it is not the scheme's default. */
function hostOf(url: string): { host: string; hostname: string } {
  const parsed = new URL(url);
  return { host: parsed.host.toLowerCase(), hostname: parsed.hostname.toLowerCase() };
}

/** Whether a secret bound to `bound` (host or host:port) may go to `url`. */
function mayGo(bound: string | undefined, url: string): boolean {
  if (bound === undefined) return true;
  const { host, hostname } = hostOf(url);
  return bound.includes(":") ? bound === host : bound === hostname;
}

/**
 * Header values that name a secret the operator did not list, or one bound to another host,
 * with the key path of each (`<server>.headers.<name>`).
 */
export function secretProblems(
  servers: Readonly<Record<string, McpServer>>,
  secrets: readonly Pick<McpSecret, "name" | "host">[],
): { path: string[]; message: string }[] {
  const problems: { path: string[]; message: string }[] = [];
  for (const [server, { url, headers }] of Object.entries(servers)) {
    for (const [header, value] of Object.entries(headers ?? {})) {
      for (const name of secretNames(value)) {
        const secret = secrets.find((known) => known.name === name);
        const path = [server, "headers", header];
        if (!secret) {
          problems.push({
            path,
            message: `names the secret ${name}, which the operator does not list in MCP_SECRETS`,
          });
        } else if (url !== undefined && !mayGo(secret.host, url)) {
          problems.push({
            path,
            message: `names the secret ${name}, which may only be sent to ${secret.host}`,
          });
        }
      }
    }
  }
  return problems;
}

/**
 * A server's headers with its secrets in place. Throws for a secret that is not there or may
 * not go to this server: the file was checked when read, so that is only a changed environment.
 */
export function resolveHeaders(
  server: Pick<McpServer, "url" | "headers">,
  secrets: readonly McpSecret[],
): Record<string, string> {
  const resolved: Record<string, string> = {};
  for (const [header, value] of Object.entries(server.headers ?? {})) {
    resolved[header] = value.replace(PLACEHOLDER, (_placeholder, inside: string) => {
      const name = SECRET_REFERENCE.exec(inside)?.[1] ?? "";
      const secret = secrets.find((known) => known.name === name);
      if (!secret || (server.url !== undefined && !mayGo(secret.host, server.url))) {
        throw new Error(`the secret ${name} is not one this server may be sent (MCP_SECRETS)`);
      }
      return secret.value;
    });
  }
  return resolved;
}
