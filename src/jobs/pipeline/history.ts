// The chat's conversation as the model API takes it, loaded from the append-only store.
import type Anthropic from "@anthropic-ai/sdk";
import { appendMessage, listMessages } from "../../store/messages.ts";
import type { Queryable } from "../../store/sql.ts";

type MessageParam = Anthropic.MessageParam;

const INTERRUPTED =
  "Not run: the worker stopped before this tool call finished. Its effects, if any, are lost.";

function pendingToolUses(message: MessageParam | undefined): string[] {
  if (message?.role !== "assistant" || typeof message.content === "string") return [];
  return message.content.flatMap((block) => (block.type === "tool_use" ? [block.id] : []));
}

/**
 * Every stored message of the chat, in order. A worker that died between a model reply and its
 * tool results leaves tool calls unanswered, which the API rejects; they get answered here (and
 * the answer is stored), so the chat can go on.
 */
export async function loadChat(
  db: Queryable,
  chatId: number,
  jobId: number,
): Promise<{ messages: MessageParam[]; fromThisJob: number }> {
  const stored = await listMessages(db, chatId);
  const messages = stored.map((m) => ({ role: m.role, content: m.content }) as MessageParam);
  let fromThisJob = stored.filter((m) => m.jobId === jobId).length;
  const unanswered = pendingToolUses(messages.at(-1));
  if (unanswered.length > 0) {
    const content: Anthropic.ToolResultBlockParam[] = unanswered.map((id) => ({
      type: "tool_result",
      tool_use_id: id,
      content: INTERRUPTED,
      is_error: true,
    }));
    await appendMessage(db, { chatId, role: "user", content, jobId });
    messages.push({ role: "user", content });
    fromThisJob++;
  }
  return { messages, fromThisJob };
}
