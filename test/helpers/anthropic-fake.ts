import { createHash, type Hash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { listen, takeTurn } from "./fake-script.ts";

/**
 * A loopback stand-in for the Anthropic Messages API. It answers POST /v1/messages with scripted
 * replies streamed in the real SSE wire format (message_start, ping, content_block_start/delta/stop
 * with text and input_json deltas split across chunks, message_delta, message_stop), checks requests
 * the way the API does (at most 4 cache_control blocks, every tool_use answered), records every
 * request body, and by default reports usage the way prompt caching would for the prefix it saw.
 */

export type FakeBlock =
  | { type: "text"; text: string }
  | { type: "tool_use"; id?: string; name: string; input: unknown }
  | { type: "thinking"; thinking: string; signature: string };

export interface FakeUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}

export interface FakeReply {
  content?: FakeBlock[];
  /** Default: "tool_use" when content has a tool call, else "end_turn". */
  stopReason?: string;
  /** Overrides the simulated usage field by field. */
  usage?: Partial<FakeUsage>;
  /** Answer with this HTTP error instead of a stream. */
  status?: number;
  error?: { type: string; message: string };
  headers?: Record<string, string>;
  /** Send an SSE `error` event after the content blocks instead of finishing the message. */
  streamError?: { type: string; message: string };
}

export interface RecordedRequest {
  // biome-ignore lint/suspicious/noExplicitAny: request bodies are arbitrary JSON inspected by tests.
  body: any;
  headers: IncomingMessage["headers"];
}

export type FakeStep =
  | FakeReply
  | ((request: RecordedRequest, index: number) => FakeReply | Promise<FakeReply>);

export interface AnthropicFakeOptions {
  /** Prompt prefixes shorter than this are not cached (the API's minimum is 1,024+ tokens). */
  minCacheTokens?: number;
}

export interface AnthropicFake {
  /** Base URL for the SDK (`baseURL`). */
  url: string;
  requests: RecordedRequest[];
  /** Usage the fake reported, one per streamed reply. */
  usages: FakeUsage[];
  /** Requests the fake rejected as the real API would, or had no reply for. */
  problems: string[];
  push(...steps: FakeStep[]): void;
  /** Scripted replies not used yet. */
  pending(): number;
  close(): Promise<void>;
}

export function text(value: string): FakeBlock {
  return { type: "text", text: value };
}

export function toolUse(name: string, input: unknown, id?: string): FakeBlock {
  return { type: "tool_use", name, input, ...(id && { id }) };
}

export function overloaded(): FakeReply {
  return {
    status: 529,
    error: { type: "overloaded_error", message: "Overloaded" },
    headers: { "retry-after-ms": "1" },
  };
}

/** Counts cache_control markers anywhere in a request body. */
export function countBreakpoints(body: unknown): number {
  if (Array.isArray(body)) return body.reduce((n: number, item) => n + countBreakpoints(item), 0);
  if (body === null || typeof body !== "object") return 0;
  let n = 0;
  for (const [key, value] of Object.entries(body)) {
    n += key === "cache_control" && value ? 1 : countBreakpoints(value);
  }
  return n;
}

export async function startAnthropicFake(
  script: FakeStep[] = [],
  options: AnthropicFakeOptions = {},
): Promise<AnthropicFake> {
  const queue = [...script];
  const requests: RecordedRequest[] = [];
  const usages: FakeUsage[] = [];
  const problems: string[] = [];
  const cache = new PromptCache(options.minCacheTokens ?? 0);
  let ids = 0;

  const server = createServer(async (req, res) => {
    const turn = await takeTurn(req, "/v1/messages", { queue, requests, problems }, validate);
    if ("kind" in turn) {
      if (turn.kind === "route") return sendError(res, 404, "not_found_error", turn.message);
      if (turn.kind === "invalid")
        return sendError(res, 400, "invalid_request_error", turn.message);
      return sendError(res, 500, "api_error", turn.message, { "x-should-retry": "false" });
    }
    const { request, reply } = turn;
    if (reply.status) {
      const error = reply.error ?? { type: "api_error", message: "error" };
      return sendError(res, reply.status, error.type, error.message, reply.headers);
    }
    const content = (reply.content ?? []).map((block) =>
      block.type === "tool_use" ? { ...block, id: block.id ?? `toolu_fake_${++ids}` } : block,
    );
    const simulated = cache.account(request.body);
    const usage: FakeUsage = {
      ...simulated,
      output_tokens: Math.max(1, Math.ceil(JSON.stringify(content).length / 4)),
      ...reply.usage,
    };
    usages.push(usage);
    const stopReason =
      reply.stopReason ?? (content.some((b) => b.type === "tool_use") ? "tool_use" : "end_turn");
    await streamMessage(
      res,
      request.body.model,
      content,
      stopReason,
      usage,
      reply.streamError,
      ++ids,
    );
  });
  const { port, ...control } = await listen(server, queue);
  return { url: `http://127.0.0.1:${port}`, requests, usages, problems, ...control };
}

function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, {
    "content-type": "application/json",
    "request-id": "req_fake_error",
    ...headers,
  });
  res.end(JSON.stringify({ type: "error", error: { type, message } }));
}

/** The checks of the real API that a loop bug would trip. */
// biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
function validate(body: any): string | undefined {
  const breakpoints = countBreakpoints(body);
  if (breakpoints > 4) {
    return `A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints}.`;
  }
  const messages: { role: string; content: unknown }[] = body.messages ?? [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as { role: string; content: unknown };
    if (message.role !== "assistant" || !Array.isArray(message.content)) continue;
    const calls = message.content
      .filter((b: { type: string }) => b.type === "tool_use")
      .map((b: { id: string }) => b.id);
    if (calls.length === 0) continue;
    const next = messages[i + 1];
    const answered = new Set(
      Array.isArray(next?.content)
        ? next.content
            .filter((b: { type: string }) => b.type === "tool_result")
            .map((b: { tool_use_id: string }) => b.tool_use_id)
        : [],
    );
    const missing = calls.filter((id: string) => !answered.has(id));
    if (missing.length > 0 && next !== undefined) {
      return `messages.${i + 1}: tool_use ids were found without tool_result blocks immediately after: ${missing.join(", ")}`;
    }
  }
  return undefined;
}

function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** Splits a string into pieces of `size` code points, so deltas arrive in chunks like the real thing. */
export function pieces(value: string, size: number): string[] {
  const chars = [...value];
  if (chars.length === 0) return [""];
  const out: string[] = [];
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(""));
  return out;
}

async function streamMessage(
  res: ServerResponse,
  model: string,
  content: FakeBlock[],
  stopReason: string,
  usage: FakeUsage,
  streamError: FakeReply["streamError"],
  id: number,
): Promise<void> {
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "request-id": `req_fake_${id}`,
  });
  const events: string[] = [
    sse("message_start", {
      type: "message_start",
      message: {
        id: `msg_fake_${id}`,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    }),
    sse("ping", { type: "ping" }),
  ];
  content.forEach((block, index) => {
    if (block.type === "text") {
      events.push(
        sse("content_block_start", {
          type: "content_block_start",
          index,
          content_block: { type: "text", text: "" },
        }),
      );
      for (const part of pieces(block.text, Math.max(1, Math.ceil(block.text.length / 3)))) {
        events.push(
          sse("content_block_delta", {
            type: "content_block_delta",
            index,
            delta: { type: "text_delta", text: part },
          }),
        );
      }
    } else if (block.type === "tool_use") {
      events.push(
        sse("content_block_start", {
          type: "content_block_start",
          index,
          content_block: { type: "tool_use", id: block.id, name: block.name, input: {} },
        }),
      );
      for (const part of ["", ...pieces(JSON.stringify(block.input), 12)]) {
        events.push(
          sse("content_block_delta", {
            type: "content_block_delta",
            index,
            delta: { type: "input_json_delta", partial_json: part },
          }),
        );
      }
    } else {
      events.push(
        sse("content_block_start", {
          type: "content_block_start",
          index,
          content_block: { type: "thinking", thinking: "", signature: "" },
        }),
        sse("content_block_delta", {
          type: "content_block_delta",
          index,
          delta: { type: "thinking_delta", thinking: block.thinking },
        }),
        sse("content_block_delta", {
          type: "content_block_delta",
          index,
          delta: { type: "signature_delta", signature: block.signature },
        }),
      );
    }
    events.push(sse("content_block_stop", { type: "content_block_stop", index }));
  });
  if (streamError) {
    events.push(sse("error", { type: "error", error: streamError }));
  } else {
    events.push(
      sse("message_delta", {
        type: "message_delta",
        delta: { stop_reason: stopReason, stop_sequence: null },
        usage,
      }),
      sse("message_stop", { type: "message_stop" }),
    );
  }
  // Cut the byte stream at arbitrary points, not only at event boundaries (even inside a UTF-8 character).
  const bytes = Buffer.from(events.join(""), "utf8");
  for (let i = 0; i < bytes.length; i += 97) {
    if (!res.write(bytes.subarray(i, i + 97)))
      await new Promise((resolve) => res.once("drain", resolve));
  }
  res.end();
}

/**
 * Prompt caching as the API does it, with tokens approximated as characters / 4: each request
 * writes an entry for the prefix ending at each cache_control block, and reads the longest
 * earlier-written prefix that ends within 20 blocks before one of its breakpoints.
 */
export class PromptCache {
  readonly #entries = new Set<string>();

  readonly minTokens: number;
  constructor(minTokens = 0) {
    this.minTokens = minTokens;
  }

  // biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
  account(body: any): Omit<FakeUsage, "output_tokens"> {
    const blocks = flatten(body);
    const hash: Hash = createHash("sha256");
    const prefixes: string[] = [];
    const cumulative: number[] = [];
    let tokens = 0;
    for (const block of blocks) {
      hash.update(block.key);
      prefixes.push(hash.copy().digest("hex"));
      tokens += Math.ceil(block.key.length / 4);
      cumulative.push(tokens);
    }
    const breakpoints = blocks.flatMap((b, i) => (b.marked ? [i] : []));
    let read = 0;
    for (const bp of breakpoints) {
      for (let j = bp; j >= Math.max(0, bp - 20); j--) {
        if (this.#entries.has(prefixes[j] as string)) {
          read = Math.max(read, cumulative[j] as number);
          break;
        }
      }
    }
    let written = read;
    for (const bp of breakpoints) {
      const size = cumulative[bp] as number;
      if (size < this.minTokens) continue;
      this.#entries.add(prefixes[bp] as string);
      written = Math.max(written, size);
    }
    return {
      input_tokens: tokens - written,
      cache_creation_input_tokens: written - read,
      cache_read_input_tokens: read,
    };
  }
}

// biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
function flatten(body: any): { key: string; marked: boolean }[] {
  const out: { key: string; marked: boolean }[] = [];
  const add = (role: string, block: unknown) => {
    const { cache_control, ...rest } = (
      typeof block === "string" ? { type: "text", text: block } : block
    ) as Record<string, unknown>;
    out.push({ key: `${role}:${JSON.stringify(rest)}`, marked: Boolean(cache_control) });
  };
  for (const tool of body.tools ?? []) add("tool", tool);
  for (const block of typeof body.system === "string" ? [body.system] : (body.system ?? []))
    add("system", block);
  for (const message of body.messages ?? []) {
    for (const block of typeof message.content === "string" ? [message.content] : message.content)
      add(message.role, block);
  }
  return out;
}
