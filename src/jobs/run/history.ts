// A conversation as the model API takes it, loaded from the append-only store.
import type Anthropic from "@anthropic-ai/sdk";
import { getCompaction } from "../../store/compactions.ts";
import { messageParamSchema } from "../../store/message-param.ts";
import { appendMessage, listMessages, type Message } from "../../store/messages.ts";
import type { Queryable } from "../../store/sql.ts";
import { parseStored } from "../../store/stored-value.ts";

type MessageParam = Anthropic.MessageParam;

const INTERRUPTED =
  "Not run: the worker stopped before this tool call finished. Its effects, if any, are lost.";

function pendingToolUses(message: MessageParam | undefined): string[] {
  if (message?.role !== "assistant" || typeof message.content === "string") return [];
  return message.content.flatMap((block) => (block.type === "tool_use" ? [block.id] : []));
}

function toParam(message: Message): MessageParam {
  const { conversationId, seq, role, content } = message;
  return parseStored(
    messageParamSchema,
    { role, content },
    `messages row ${seq} of conversation ${conversationId}`,
  );
}

export interface LoadedConversation {
  messages: MessageParam[];
  fromThisJob: number;
  /** How many stored messages `messages` stand for (a compaction stands for several). */
  storedCount: number;
}

/**
 * The conversation's messages: its last compaction, if any, then the stored messages after it. A
 * worker that died between a model reply and its tool results leaves tool calls unanswered, which
 * the API rejects; they get answered here (and the answer is stored), so the conversation can go
 * on. jobId is null for the CLI, whose turns are no jobs.
 */
export async function loadConversation(
  db: Queryable,
  conversationId: number,
  jobId: number | null,
): Promise<LoadedConversation> {
  const [stored, compaction] = await Promise.all([
    listMessages(db, conversationId),
    getCompaction(db, conversationId),
  ]);
  const all = stored.map(toParam);
  const covered = compaction && compaction.coveredMessages <= all.length ? compaction : undefined;
  const messages = covered ? [...covered.messages, ...all.slice(covered.coveredMessages)] : all;
  let storedCount = stored.length;
  let fromThisJob = stored.filter((m) => m.jobId === jobId).length;
  const unanswered = pendingToolUses(messages.at(-1));
  if (unanswered.length > 0) {
    const content: Anthropic.ToolResultBlockParam[] = unanswered.map((id) => ({
      type: "tool_result",
      tool_use_id: id,
      content: INTERRUPTED,
      is_error: true,
    }));
    await appendMessage(db, { conversationId, role: "user", content, jobId });
    messages.push({ role: "user", content });
    fromThisJob++;
    storedCount++;
  }
  return { messages, fromThisJob, storedCount };
}

/** An attempt after a crash goes on from what the earlier attempt stored. */
export function resumes(attempt: number, conversation: LoadedConversation): boolean {
  return attempt > 1 && conversation.fromThisJob > 0;
}
