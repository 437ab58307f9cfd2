import type Anthropic from "@anthropic-ai/sdk";

type MessageParam = Anthropic.MessageParam;
type Block = Anthropic.ContentBlockParam;

const EPHEMERAL: Anthropic.CacheControlEphemeral = { type: "ephemeral" };

/** The API accepts at most this many cache_control markers per request. */
const MAX_BREAKPOINTS = 4;

export interface CacheableRequest {
  tools: Anthropic.ToolUnion[];
  system: string;
  messages: readonly MessageParam[];
}

export interface CachedRequest {
  tools: Anthropic.ToolUnion[];
  system: Anthropic.TextBlockParam[];
  messages: MessageParam[];
}

/**
 * Returns a copy of the request with prompt-cache breakpoints on the last tool, the system prompt,
 * and the last block of the two latest user messages. The previous request's breakpoint is where
 * it wrote its cache entry, so the new request reads that entry even when more than 20
 * blocks (the API's lookback) were added since. Stored messages are never modified, and markers
 * already present in them are dropped so they cannot pile up past the limit.
 */
export function withCacheBreakpoints(request: CacheableRequest): CachedRequest {
  const tools = request.tools.map((tool, i) =>
    i === request.tools.length - 1 ? { ...tool, cache_control: EPHEMERAL } : stripTool(tool),
  );
  const system: Anthropic.TextBlockParam[] = [
    { type: "text", text: request.system, cache_control: EPHEMERAL },
  ];
  const userTurns = request.messages
    .map((m, i) => (m.role === "user" && hasCacheableEnd(m) ? i : -1))
    .filter((i) => i >= 0)
    .slice(-(MAX_BREAKPOINTS - 2));
  const messages = request.messages.map((message, i) =>
    userTurns.includes(i) ? markLastBlock(message) : stripMessage(message),
  );
  return { tools, system, messages };
}

function hasCacheableEnd(message: MessageParam): boolean {
  if (typeof message.content === "string") return message.content.length > 0;
  const last = message.content.at(-1);
  return last !== undefined && !(last.type === "text" && last.text.length === 0);
}

function markLastBlock(message: MessageParam): MessageParam {
  const blocks: Block[] =
    typeof message.content === "string"
      ? [{ type: "text", text: message.content }]
      : message.content.map(stripBlock);
  const last = blocks.length - 1;
  blocks[last] = { ...(blocks[last] as Block), cache_control: EPHEMERAL } as Block;
  return { ...message, content: blocks } as MessageParam;
}

function stripMessage(message: MessageParam): MessageParam {
  if (typeof message.content === "string") return message;
  if (!message.content.some((b) => "cache_control" in b)) return message;
  return { ...message, content: message.content.map(stripBlock) } as MessageParam;
}

function stripBlock(block: Block): Block {
  if (!("cache_control" in block)) return block;
  const { cache_control: _, ...rest } = block as Block & { cache_control?: unknown };
  return rest as Block;
}

function stripTool(tool: Anthropic.ToolUnion): Anthropic.ToolUnion {
  if (!("cache_control" in tool)) return tool;
  const { cache_control: _, ...rest } = tool as Anthropic.ToolUnion & { cache_control?: unknown };
  return rest as Anthropic.ToolUnion;
}
