import type Anthropic from "@anthropic-ai/sdk";

type MessageParam = Anthropic.MessageParam;

export const CLEARED_PLACEHOLDER = "[output cleared to save context]";

export const SUMMARY_REQUEST =
  "The conversation is about to be shortened to fit the context window. Write a summary that lets you carry on without the earlier messages: the task and any constraints the user gave, what you have done so far (files changed and why), what you found out (commands, test results, errors), and what is left to do. Reply with the summary only, as plain text.";

export interface CompactionOptions {
  /** Compact when the prompt reaches this share of the context window; default 0.8. */
  threshold?: number;
  /** Tool results kept intact, newest first; default 6. */
  keepToolResults?: number;
  /** Messages kept verbatim after a summary; default 6. */
  keepMessages?: number;
  /** Overrides the model's context window (tests, or a deliberately smaller budget). */
  contextWindow?: number;
}

/**
 * What an image costs, roughly: the APIs bill by pixels, not by the size of its base64 text, and
 * scale a large one down first (Anthropic's to about 1,600 tokens).
 */
const IMAGE_TOKENS = 1_600;

/** An image block (Messages API) or image part (Chat Completions). */
function isImage(value: unknown): boolean {
  if (typeof value !== "object" || value === null || !("type" in value)) return false;
  return value.type === "image" || value.type === "image_url";
}

/**
 * The same rough measure the API's prompt sizes follow: about four characters per token, and a
 * flat IMAGE_TOKENS per image.
 */
export function estimateTokens(value: unknown): number {
  let images = 0;
  const json = JSON.stringify(value ?? "", (_key, item: unknown) => {
    if (!isImage(item)) return item;
    images++;
    return undefined;
  });
  return Math.ceil((json ?? "").length / 4) + images * IMAGE_TOKENS;
}

/**
 * Replaces the content of all but the newest `keep` tool results with a placeholder. Returns new
 * message objects where something changed; the given array and its messages are left alone.
 */
export function clearOldToolResults(
  messages: readonly MessageParam[],
  keep: number,
): { messages: MessageParam[]; cleared: number; tokensFreed: number } {
  const positions: [number, number][] = [];
  messages.forEach((message, m) => {
    if (typeof message.content === "string") return;
    message.content.forEach((block, b) => {
      if (block.type === "tool_result" && block.content !== CLEARED_PLACEHOLDER)
        positions.push([m, b]);
    });
  });
  const clear = positions.slice(0, Math.max(0, positions.length - keep));
  const result = [...messages];
  let tokensFreed = 0;
  for (const [m, b] of clear) {
    const message = result[m] as MessageParam;
    const content = [...(message.content as Anthropic.ContentBlockParam[])];
    const block = content[b] as Anthropic.ToolResultBlockParam;
    tokensFreed += Math.max(0, estimateTokens(block.content) - estimateTokens(CLEARED_PLACEHOLDER));
    content[b] = { ...block, content: CLEARED_PLACEHOLDER };
    result[m] = { ...message, content } as MessageParam;
  }
  return { messages: result, cleared: clear.length, tokensFreed };
}

/**
 * Splits the conversation for a summary. The kept tail starts at an assistant message, so every
 * tool result in it still follows its tool call, and a summary user message can go before it.
 * Returns undefined when there is nothing old enough to summarise.
 */
export function splitForSummary(
  messages: readonly MessageParam[],
  keepMessages: number,
): { head: MessageParam[]; tail: MessageParam[] } | undefined {
  for (let cut = Math.max(1, messages.length - keepMessages); cut > 0; cut--) {
    if (messages[cut]?.role === "assistant" && messages[cut - 1]?.role === "user") {
      return { head: messages.slice(0, cut), tail: messages.slice(cut) };
    }
  }
  return undefined;
}

/**
 * The head of the conversation plus the request to summarise it, merged into its last user
 * message.
 */
export function summaryRequestMessages(head: readonly MessageParam[]): MessageParam[] {
  const last = head.at(-1) as MessageParam;
  const content: Anthropic.ContentBlockParam[] =
    typeof last.content === "string" ? [{ type: "text", text: last.content }] : [...last.content];
  content.push({ type: "text", text: SUMMARY_REQUEST });
  return [...head.slice(0, -1), { role: "user", content }];
}

export function summaryMessage(summary: string): MessageParam {
  return {
    role: "user",
    content: [
      {
        type: "text",
        text: `Earlier messages of this conversation were replaced by this summary to save context:\n<summary>\n${summary.trim()}\n</summary>`,
      },
    ],
  };
}
