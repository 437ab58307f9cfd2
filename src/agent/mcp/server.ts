// One MCP server of a job, through the official SDK's client: started when first needed (its
// tools listed then, once), each call held to a deadline, and given up on for the rest of the job
// once it fails as a server (it hangs, exits, floods or speaks garbage), with one line that says
// why. A tool that answers with an error is the tool's answer, not the server's failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  type CallToolResult,
  ErrorCode,
  McpError,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { type McpSecret, type McpServerSetting, resolveHeaders } from "../../config/mcp.ts";
import { sanitizePlain } from "../../github/sanitize.ts";
import { redact } from "../../log/redact.ts";
import type { Workspace } from "../../workspace/types.ts";
import { egressFetch, egressRefusal, type McpEgress } from "./http.ts";
import { WorkspaceStdioTransport } from "./stdio.ts";

/** How long a server has to start and list its tools. */
const START_MS = 60_000;
/** The longest one call may take (less when the run has less time left). */
export const CALL_MS = 120_000;
/** Tools read from one server at most; a server that lists more is cut there. */
const MAX_LISTED = 200;
const MAX_PAGES = 20;
/** The longest reason the model is told. */
const REASON_CAP = 600;

const VERSION = "1";

function quote(word: string): string {
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** What a server is doing, for the job's log. */
export interface McpServerEvent {
  server: string;
  /** started: its tools listed; failed: given up on for the rest of the job. */
  state: "started" | "failed";
  message: string;
  durationMs: number;
}

export interface McpServerOptions {
  name: string;
  setting: McpServerSetting;
  workspace: Workspace;
  secrets: readonly McpSecret[];
  /** How an HTTP server is reached; the allow-list applies to a file's servers only. */
  egress: Omit<McpEgress, "allowHosts"> & { allowHosts: readonly string[] };
  /** The job's abort: the server is stopped with it. */
  signal?: AbortSignal;
  onEvent?(event: McpServerEvent): void;
}

/** The server failed as a server; its tools are off for the rest of the job. */
export class McpServerFailed extends Error {
  override name = "McpServerFailed";
}

/** One line of untrusted text the model may read. */
function clean(text: string): string {
  const line = sanitizePlain(text).replace(/\s+/g, " ").trim();
  return redact(line.length > REASON_CAP ? `${line.slice(0, REASON_CAP)}…` : line);
}

export class McpServer {
  readonly name: string;
  readonly #o: McpServerOptions;
  #client: Client | undefined;
  #stdio: WorkspaceStdioTransport | undefined;
  #tools: Promise<Tool[]> | undefined;
  #failed: string | undefined;

  constructor(options: McpServerOptions) {
    this.name = options.name;
    this.#o = options;
  }

  /** Whether its tools were listed (the server runs, or ran). */
  get listed(): boolean {
    return this.#tools !== undefined && this.#failed === undefined;
  }

  /** Why it was given up on, if it was. */
  get failed(): string | undefined {
    return this.#failed;
  }

  /** Its tools, the allowed ones only, starting it the first time. */
  tools(): Promise<Tool[]> {
    this.#tools ??= this.#start();
    return this.#tools;
  }

  async call(
    tool: string,
    input: Record<string, unknown>,
    timeoutMs: number,
    signal?: AbortSignal,
  ) {
    await this.tools();
    const client = this.#client;
    if (!client || this.#failed) throw new McpServerFailed(this.#failed ?? "it is not running");
    try {
      return (await client.callTool({ name: tool, arguments: input }, undefined, {
        timeout: timeoutMs,
        maxTotalTimeout: timeoutMs,
        signal,
      })) as CallToolResult;
    } catch (error) {
      if (signal?.aborted) throw new Error("the run was stopped");
      const gone = this.#serverFailure(error, timeoutMs);
      if (gone === undefined) throw new Error(clean(describe(error)));
      throw await this.#fail(gone);
    }
  }

  async close(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    await client?.close().catch(() => undefined);
  }

  async #start(): Promise<Tool[]> {
    const started = performance.now();
    const { setting } = this.#o;
    try {
      const client = new Client({ name: "vmpilot", version: VERSION }, { capabilities: {} });
      this.#client = client;
      await client.connect(this.#transport(), { timeout: START_MS, signal: this.#o.signal });
      const tools = await this.#list(client);
      const allowed = setting.tools ? new Set(setting.tools) : undefined;
      const offered = tools.filter((tool) => allowed?.has(tool.name) ?? true);
      this.#o.onEvent?.({
        server: this.name,
        state: "started",
        message: `${offered.length} of its ${tools.length} tools offered`,
        durationMs: performance.now() - started,
      });
      return offered;
    } catch (error) {
      if (this.#o.signal?.aborted) throw new Error("the run was stopped");
      throw await this.#fail(
        this.#serverFailure(error, START_MS) ?? clean(describe(error)),
        started,
      );
    }
  }

  async #list(client: Client): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES && tools.length < MAX_LISTED; page++) {
      const listed = await client.listTools(cursor === undefined ? undefined : { cursor }, {
        timeout: START_MS,
        signal: this.#o.signal,
      });
      tools.push(...listed.tools);
      cursor = listed.nextCursor;
      if (cursor === undefined) break;
    }
    return tools.slice(0, MAX_LISTED);
  }

  #transport() {
    const { setting, workspace, signal } = this.#o;
    if (setting.command) {
      this.#stdio = new WorkspaceStdioTransport(
        workspace,
        `exec ${setting.command.map(quote).join(" ")}`,
        signal,
      );
      return this.#stdio;
    }
    const url = new URL(setting.url ?? "");
    const egress: McpEgress = {
      policy: this.#o.egress.policy,
      ...(setting.from === "file" && { allowHosts: this.#o.egress.allowHosts }),
    };
    const refused = egressRefusal(url, egress);
    if (refused) throw new McpServerFailed(`${url.origin} may not be reached: ${refused}`);
    return new StreamableHTTPClientTransport(url, {
      requestInit: { headers: resolveHeaders(setting, this.#o.secrets) },
      fetch: egressFetch(egress),
      // A stream that drops is not resumed: the call's deadline says what happened.
      reconnectionOptions: {
        maxRetries: 0,
        initialReconnectionDelay: 1000,
        maxReconnectionDelay: 1000,
        reconnectionDelayGrowFactor: 1,
      },
    });
  }

  /**
   * Why the error means the server itself is not to be used any more (it hangs, it is gone, it
   * floods), or undefined for the answer of a server that works.
   */
  #serverFailure(error: unknown, timeoutMs: number): string | undefined {
    const problem = this.#stdio?.problem;
    if (problem !== undefined) return clean(problem);
    if (error instanceof McpServerFailed) return error.message;
    if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
      const garbage = this.#stdio?.garbage;
      const noise =
        garbage && garbage.lines > 0
          ? `; it wrote ${garbage.lines} lines that are not JSON-RPC, the first: ${clean(garbage.first ?? "")}`
          : "";
      return `it did not answer within ${Math.round(timeoutMs / 1000)} s${noise}`;
    }
    if (error instanceof McpError && error.code === ErrorCode.ConnectionClosed) {
      return "its connection closed";
    }
    // A JSON-RPC error the server answered with: it works.
    if (error instanceof McpError) return undefined;
    // The HTTP transport's own errors (refused, unreachable, an answer too large or not MCP).
    return this.#stdio ? undefined : clean(describe(error));
  }

  async #fail(reason: string, started = performance.now()): Promise<McpServerFailed> {
    if (this.#failed === undefined) {
      this.#failed = reason;
      this.#o.onEvent?.({
        server: this.name,
        state: "failed",
        message: reason,
        durationMs: performance.now() - started,
      });
    }
    await this.close();
    return new McpServerFailed(this.#failed);
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
