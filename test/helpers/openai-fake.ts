import { createServer, type ServerResponse } from "node:http";
import type { FakeReply, FakeStep, RecordedRequest } from "./anthropic-fake.ts";
import { pieces } from "./anthropic-fake.ts";
import { type FakeScript, listen, takeTurn } from "./fake-script.ts";

/**
 * A loopback stand-in for an OpenAI-compatible Chat Completions server. It takes the same scripted
 * replies as the Anthropic fake (text and tool_use blocks) and answers POST /v1/chat/completions in
 * OpenAI's wire format: with `stream`, `chat.completion.chunk` SSE deltas (tool-call arguments split
 * across chunks), the usage chunk when `stream_options.include_usage` asks, then `data: [DONE]`;
 * without, one `chat.completion`. It checks that every tool call is answered by `tool` messages
 * right after it, reports prefix-cache hits in `prompt_tokens_details.cached_tokens` the way
 * OpenAI's automatic caching does, and answers errors with OpenAI's error object.
 */

export interface CompatibleReply extends FakeReply {
  /** Leave out the usage chunk, as servers that ignore `include_usage` do. */
  noUsage?: boolean;
  /** Streamed as `reasoning_content` deltas, as DeepSeek, vLLM and OpenRouter do. */
  reasoning?: string;
  /** Instead of the one the content implies. */
  finishReason?: string;
  /** Tool calls' raw `arguments`, by their position among the calls (to send broken JSON). */
  rawArguments?: Record<number, string>;
  /** With `status`: OpenAI's error `code` (e.g. context_length_exceeded). */
  code?: string;
}

export type CompatibleStep =
  | CompatibleReply
  | FakeStep
  | ((request: RecordedRequest, index: number) => CompatibleReply);

export interface OpenAiFake {
  /** Base URL for the SDK: ends in /v1. */
  url: string;
  requests: RecordedRequest[];
  problems: string[];
  /** cached_tokens and prompt_tokens of each reply. */
  usages: { prompt: number; cached: number }[];
  push(...steps: CompatibleStep[]): void;
  pending(): number;
  close(): Promise<void>;
}

const CACHE_MIN_TOKENS = 1024;
const CACHE_BLOCK_TOKENS = 128;

function tokens(text: string): number {
  return Math.ceil(text.length / 4);
}

export async function startOpenAiFake(): Promise<OpenAiFake> {
  const queue: CompatibleStep[] = [];
  const requests: RecordedRequest[] = [];
  const problems: string[] = [];
  const usages: { prompt: number; cached: number }[] = [];
  const prefixes: string[] = [];
  let ids = 0;

  const server = createServer(async (req, res) => {
    const turn = await takeTurn<CompatibleReply>(
      req,
      "/v1/chat/completions",
      { queue: queue as FakeScript<CompatibleReply>["queue"], requests, problems },
      validate,
    );
    if ("kind" in turn) {
      const status = turn.kind === "route" ? 404 : 400;
      return sendError(res, status, "invalid_request_error", turn.message);
    }
    const { request, reply } = turn;
    if (reply.status) {
      const error = reply.error ?? { type: "server_error", message: "error" };
      return sendError(res, reply.status, error.type, error.message, reply.headers, reply.code);
    }
    // Prompt caching as OpenAI does it: the longest prefix an earlier request shared, in blocks.
    const prompt = JSON.stringify([request.body.tools ?? [], request.body.messages]);
    let shared = 0;
    for (const earlier of prefixes) {
      let n = 0;
      while (n < earlier.length && n < prompt.length && earlier[n] === prompt[n]) n++;
      shared = Math.max(shared, n);
    }
    prefixes.push(prompt);
    const sharedTokens = tokens(prompt.slice(0, shared));
    const cached =
      sharedTokens >= CACHE_MIN_TOKENS
        ? Math.floor(sharedTokens / CACHE_BLOCK_TOKENS) * CACHE_BLOCK_TOKENS
        : 0;
    const promptTokens = tokens(prompt);
    usages.push({ prompt: promptTokens, cached });
    const completion = compose(reply, ++ids);
    const usage = {
      prompt_tokens: reply.usage?.input_tokens ?? promptTokens,
      completion_tokens:
        reply.usage?.output_tokens ?? Math.max(1, tokens(JSON.stringify(completion))),
      total_tokens: 0,
      prompt_tokens_details: { cached_tokens: reply.usage?.cache_read_input_tokens ?? cached },
    };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    if (request.body.stream) {
      const withUsage = request.body.stream_options?.include_usage === true && !reply.noUsage;
      await streamCompletion(
        res,
        request.body.model,
        completion,
        withUsage ? usage : undefined,
        reply.reasoning,
      );
    } else {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id: `chatcmpl-fake${completion.id}`,
          object: "chat.completion",
          created: 1_700_000_000,
          model: request.body.model,
          choices: [
            {
              index: 0,
              message: {
                role: "assistant",
                content: completion.text || null,
                ...(completion.calls.length > 0 && { tool_calls: completion.calls }),
              },
              finish_reason: completion.finish,
            },
          ],
          ...(!reply.noUsage && { usage }),
        }),
      );
    }
  });
  const { port, ...control } = await listen(server, queue);
  return { url: `http://127.0.0.1:${port}/v1`, requests, problems, usages, ...control };
}

interface Completion {
  id: number;
  text: string;
  calls: { id: string; type: "function"; function: { name: string; arguments: string } }[];
  finish: string;
}

function compose(reply: CompatibleReply, id: number): Completion {
  const content = reply.content ?? [];
  const text = content.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("");
  const calls = content
    .flatMap((b) => (b.type === "tool_use" ? [b] : []))
    .map((b, i) => ({
      id: b.id ?? `call_fake${id}_${i}`,
      type: "function" as const,
      function: { name: b.name, arguments: reply.rawArguments?.[i] ?? JSON.stringify(b.input) },
    }));
  const finish = reply.finishReason ?? (calls.length > 0 ? "tool_calls" : "stop");
  return { id, text, calls, finish };
}

function sendError(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
  code?: string,
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify({ error: { message, type, param: null, code: code ?? null } }));
}

/** What the real API refuses that a conversion bug would produce. */
// biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
function validate(body: any): string | undefined {
  const messages: { role: string; tool_calls?: { id: string }[]; tool_call_id?: string }[] =
    body.messages ?? [];
  if (messages[0]?.role !== "system") return "fake: the first message should be the system prompt";
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i];
    if (message?.role === "tool") {
      const owner = messages
        .slice(0, i)
        .reverse()
        .find((m) => m.role !== "tool");
      if (!owner?.tool_calls?.some((call) => call.id === message.tool_call_id)) {
        return `messages.[${i}].role: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.`;
      }
    }
    const calls = message?.tool_calls ?? [];
    if (calls.length === 0) continue;
    const answered = new Set<string>();
    for (let j = i + 1; messages[j]?.role === "tool"; j++)
      answered.add(messages[j]?.tool_call_id ?? "");
    const missing = calls.filter((call) => !answered.has(call.id)).map((call) => call.id);
    if (missing.length > 0) {
      return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${missing.join(", ")}`;
    }
  }
  return undefined;
}

async function streamCompletion(
  res: ServerResponse,
  model: string,
  completion: Completion,
  usage: object | undefined,
  reasoning: string | undefined,
): Promise<void> {
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
  });
  const base = {
    id: `chatcmpl-fake${completion.id}`,
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model,
  };
  const chunk = (delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const events = [chunk({ role: "assistant", content: "" })];
  if (reasoning)
    for (const part of pieces(reasoning, 7)) events.push(chunk({ reasoning_content: part }));
  if (completion.text)
    for (const part of pieces(completion.text, 5)) events.push(chunk({ content: part }));
  completion.calls.forEach((call, index) => {
    events.push(
      chunk({
        tool_calls: [
          {
            index,
            id: call.id,
            type: "function",
            function: { name: call.function.name, arguments: "" },
          },
        ],
      }),
    );
    for (const part of pieces(call.function.arguments, 9)) {
      events.push(chunk({ tool_calls: [{ index, function: { arguments: part } }] }));
    }
  });
  events.push(chunk({}, completion.finish));
  if (usage) events.push(`data: ${JSON.stringify({ ...base, choices: [], usage })}\n\n`);
  events.push("data: [DONE]\n\n");
  // Cut the byte stream at arbitrary points, not only at event boundaries.
  const bytes = Buffer.from(events.join(""), "utf8");
  for (let i = 0; i < bytes.length; i += 61) {
    if (!res.write(bytes.subarray(i, i + 61)))
      await new Promise((resolve) => res.once("drain", resolve));
  }
  res.end();
}
