// A run's MCP servers (config/mcp.ts), as tools for the loop. Nothing starts until the model asks:
// a run that uses no MCP tool starts no server. Until then each server is offered as one tool that
// starts it; once started, its tools are listed (once for the run) and offered by their own names
// from the next request on. A call of a server's tool by its name starts the server too, so a
// conversation that used one in an earlier run goes on without the extra step. The tools offered
// change once per started server, which costs the prompt cache that once.
import type { McpSecret, McpServerSetting } from "../../config/mcp.ts";
import { registerSecret } from "../../log/redact.ts";
import type { Workspace } from "../../workspace/types.ts";
import type { AgentTool, ToolSource } from "../tools/types.ts";
import type { McpEgress } from "./http.ts";
import { McpServer, type McpServerEvent } from "./server.ts";
import { PREFIX, serverTools, starterTool, unlistedTool } from "./tools.ts";

/** One line for a person: "MCP server docs started in 850 ms: 3 of its 12 tools offered". */
export function serverLine(event: McpServerEvent): string {
  const ms = Math.round(event.durationMs);
  return event.state === "started"
    ? `MCP server ${event.server} started in ${ms} ms: ${event.message}`
    : `MCP server ${event.server} failed and is off for the rest of this run: ${event.message}`;
}

export interface McpToolsOptions {
  servers: Readonly<Record<string, McpServerSetting>>;
  workspace: Workspace;
  /** MCP_SECRETS, for HTTP servers' headers. */
  secrets: readonly McpSecret[];
  /** How HTTP servers are reached; `allowHosts` (network.allow) holds for a file's servers. */
  egress: Omit<McpEgress, "allowHosts"> & { allowHosts: readonly string[] };
  signal?: AbortSignal;
  onEvent?(event: McpServerEvent): void;
}

/** A run's servers as tools; undefined when it has none. */
export function openMcp(options: McpToolsOptions): McpTools | undefined {
  return Object.keys(options.servers).length > 0 ? new McpTools(options) : undefined;
}

export class McpTools implements ToolSource {
  readonly #servers: McpServer[];
  readonly #allowed: Map<string, readonly string[] | undefined>;
  #offered: AgentTool[] = [];
  /** The servers' states the offered tools were made for. */
  #made = "";

  constructor(options: McpToolsOptions) {
    // A server that echoes a secret back is redacted before the model, the log or the store.
    for (const secret of options.secrets) registerSecret(secret.value);
    const names = Object.keys(options.servers).sort();
    this.#allowed = new Map(names.map((name) => [name, options.servers[name]?.tools]));
    this.#servers = names.map(
      (name) =>
        new McpServer({
          ...options,
          name,
          setting: options.servers[name] as McpServerSetting,
        }),
    );
  }

  /** Whether any server was started (however it went). */
  get started(): boolean {
    return this.#servers.some((server) => server.listed || server.failed !== undefined);
  }

  /**
   * The tools to offer now, in a stable order: a started server's own, a starter for each one not
   * started yet, nothing of one that failed.
   */
  async offered(): Promise<AgentTool[]> {
    const states = this.#servers.map((s) => (s.failed ? "x" : s.listed ? "l" : "-")).join("");
    if (states === this.#made) return this.#offered;
    const offered: AgentTool[] = [];
    for (const server of this.#servers) {
      if (server.failed !== undefined) continue;
      if (!server.listed) offered.push(starterTool(server, this.#allowed.get(server.name)));
      else offered.push(...serverTools(server, await server.tools()).offered);
    }
    this.#made = states;
    this.#offered = offered;
    return offered;
  }

  /** A tool the model called that is not offered: a server's, by its name, starts that server. */
  find(name: string): AgentTool | undefined {
    if (!name.startsWith(PREFIX)) return undefined;
    const starter = this.#servers.find((each) => name === `${PREFIX}${each.name}`);
    if (starter) return starterTool(starter, this.#allowed.get(starter.name));
    const server = this.#servers.find((each) => name.startsWith(`${PREFIX}${each.name}__`));
    return server ? unlistedTool(server, name) : undefined;
  }

  async close(): Promise<void> {
    await Promise.all(this.#servers.map((server) => server.close()));
  }
}
