// The stored conversation (Messages API shape) as Chat Completions messages, and a Chat Completions
// reply back in the stored shape. The mapping is deterministic, so the prompt prefix stays
// byte-stable from turn to turn and a prefix-caching server can reuse it.
import { randomBytes } from "node:crypto";
import type Anthropic from "@anthropic-ai/sdk";
import type OpenAI from "openai";
import type { MessageParam, ReplyBlock } from "./types.ts";

type ChatMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;
type UserPart = OpenAI.Chat.Completions.ChatCompletionContentPart;
type Block = Anthropic.ContentBlockParam;

export const IMAGE_LEFT_OUT = "[An image was left out here: this model does not take images.]";

function blocksOf(message: MessageParam): Block[] {
  return typeof message.content === "string"
    ? [{ type: "text", text: message.content }]
    : [...message.content];
}

function resultText(block: Anthropic.ToolResultBlockParam): string {
  const content = block.content;
  const text =
    typeof content === "string"
      ? content
      : (content ?? [])
          .map((part) => (part.type === "text" ? part.text : `[${part.type}]`))
          .join("\n");
  // No is_error field in this API: the model reads it from the text.
  return block.is_error ? `Error: ${text}` : text;
}

/**
 * A user message's text and images: as content parts (images as data: URLs) for a model that takes
 * images, else as text with a line where each image was.
 */
function userContent(blocks: readonly Block[], vision: boolean): string | UserPart[] {
  const parts: UserPart[] = [];
  for (const block of blocks) {
    if (block.type === "text") parts.push({ type: "text", text: block.text });
    if (block.type !== "image") continue;
    if (vision && block.source.type === "base64") {
      const url = `data:${block.source.media_type};base64,${block.source.data}`;
      parts.push({ type: "image_url", image_url: { url } });
    } else {
      parts.push({ type: "text", text: IMAGE_LEFT_OUT });
    }
  }
  if (parts.some((part) => part.type !== "text")) return parts;
  return parts.flatMap((part) => (part.type === "text" ? [part.text] : [])).join("\n");
}

export function toChatMessages(
  system: string,
  messages: readonly MessageParam[],
  vision = false,
): ChatMessage[] {
  const out: ChatMessage[] = [{ role: "system", content: system }];
  for (const message of messages) {
    const blocks = blocksOf(message);
    const text = blocks.flatMap((b) => (b.type === "text" ? [b.text] : [])).join("\n");
    if (message.role === "assistant") {
      // Thinking blocks are Anthropic's own; another provider cannot read their signatures.
      const calls = blocks.flatMap((b) =>
        b.type === "tool_use"
          ? [
              {
                id: b.id,
                type: "function" as const,
                function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) },
              },
            ]
          : [],
      );
      if (!text && calls.length === 0) continue;
      out.push({
        role: "assistant",
        content: text || null,
        ...(calls.length > 0 && { tool_calls: calls }),
      });
      continue;
    }
    // Tool results first: the API wants them right after the assistant's calls.
    for (const block of blocks) {
      if (block.type === "tool_result") {
        out.push({ role: "tool", tool_call_id: block.tool_use_id, content: resultText(block) });
      }
    }
    const content = userContent(blocks, vision);
    if (content.length > 0) out.push({ role: "user", content });
  }
  return out;
}

/** Ids the Messages API accepts too, so a conversation can move between providers. */
const SAFE_ID = /^[A-Za-z0-9_-]{1,64}$/;

export interface RawToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** The reply's text and tool calls as stored blocks; calls whose arguments are not JSON objects are listed. */
export function toReplyBlocks(
  text: string,
  calls: readonly RawToolCall[],
): { content: ReplyBlock[]; invalid: Record<string, string> } {
  const content: ReplyBlock[] = [];
  const invalid: Record<string, string> = {};
  if (text.trim()) content.push({ type: "text", text });
  for (const call of calls) {
    const id = SAFE_ID.test(call.id) ? call.id : `call_${randomBytes(12).toString("hex")}`;
    let input: unknown = {};
    try {
      input = call.arguments.trim() ? JSON.parse(call.arguments) : {};
      if (typeof input !== "object" || input === null || Array.isArray(input)) {
        throw new Error("not a JSON object");
      }
    } catch (error) {
      input = {};
      invalid[id] =
        `The arguments of this ${call.name} call were not a valid JSON object (${(error as Error).message}), so it was not run. Call it again with a JSON object of arguments.`;
    }
    content.push({ type: "tool_use", id, name: call.name, input });
  }
  return { content, invalid };
}
