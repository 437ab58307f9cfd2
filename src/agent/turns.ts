import type Anthropic from "@anthropic-ai/sdk";

type MessageParam = Anthropic.MessageParam;

function blocks(message: MessageParam): Anthropic.ContentBlockParam[] {
  return typeof message.content === "string"
    ? [{ type: "text", text: message.content }]
    : [...(message.content as Anthropic.ContentBlockParam[])];
}

/**
 * Merges back-to-back user messages into one turn for the request. They occur when a run resumes
 * after one that stopped on its own tool results, or after a refused or empty assistant turn.
 * Returns the same array when there is nothing to merge; stored messages are never changed.
 */
export function mergeUserTurns(messages: readonly MessageParam[]): readonly MessageParam[] {
  if (!messages.some((m, i) => i > 0 && m.role === "user" && messages[i - 1]?.role === "user"))
    return messages;
  const merged: MessageParam[] = [];
  for (const message of messages) {
    const previous = merged.at(-1);
    if (message.role === "user" && previous?.role === "user") {
      merged[merged.length - 1] = {
        role: "user",
        content: [...blocks(previous), ...blocks(message)],
      };
    } else {
      merged.push(message);
    }
  }
  return merged;
}
