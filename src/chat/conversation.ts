// Which stored conversation a request continues. Clients send the whole history every time; the
// longest part of it that ends at a reply vmpilot gave finds the turn (see history-hash.ts). A
// request that goes back (regenerate, an edited message) branches the conversation at that turn.
import { sanitize } from "../github/sanitize.ts";
import { type ClientMessage, extendHash } from "../jobs/chat-reply/history-hash.ts";
import {
  type ApiConversation,
  branchApiConversation,
  type ChatTurn,
  type ConversationOwner,
  createApiConversation,
  findClientConversation,
  findTurn,
  getApiConversation,
  lastTurn,
} from "../store/api-conversations.ts";
import type { Queryable } from "../store/sql.ts";
import type { Principal } from "./auth.ts";
import { type CompletionRequest, imageUrls, messageText } from "./body.ts";
import { badRequest } from "./errors.ts";
import type { ChatModel } from "./models.ts";

/** Earlier messages vmpilot has not seen are passed on as context, this much at most. */
const TRANSCRIPT_CAP = 20_000;
const PR_COMMAND = /^[ \t]*\/vmpilot[ \t]+pr\b.*$/im;

export interface PlannedTurn {
  conversation: ApiConversation;
  /** The new message, sanitized: the instruction. */
  instruction: string;
  system: string;
  askedHash: string;
  transcript: string;
  pullRequest: boolean;
}

interface Split {
  system: string;
  history: ClientMessage[];
  user: string;
}

function split(request: CompletionRequest): Split {
  const system = request.messages
    .filter((m) => m.role === "system" || m.role === "developer")
    .map((m) => sanitize(messageText(m)))
    .join("\n\n");
  const talk: ClientMessage[] = request.messages.flatMap((m) =>
    m.role === "user" || m.role === "assistant" ? [{ role: m.role, text: messageText(m) }] : [],
  );
  const last = talk.pop();
  if (last?.role !== "user" || (!last.text.trim() && askedImages(request).length === 0)) {
    throw badRequest("The last message must be a user message with text or an image.");
  }
  return { system, history: talk, user: last.text };
}

/**
 * The URLs of the images the new message carries. Earlier messages' images went with their own
 * turns; those of a conversation begun elsewhere are not carried over.
 */
export function askedImages(request: CompletionRequest): string[] {
  const last = request.messages.findLast((m) => m.role === "user" || m.role === "assistant");
  return last?.role === "user" ? imageUrls(last) : [];
}

function transcriptOf(messages: readonly ClientMessage[]): string {
  const text = messages.map((m) => `${m.role}: ${sanitize(m.text)}`).join("\n\n");
  return text.length > TRANSCRIPT_CAP ? `[… earlier cut …]\n${text.slice(-TRANSCRIPT_CAP)}` : text;
}

/**
 * The owner's newest turn that the longest prefix of the history, ending at a reply, hashes to;
 * and that prefix's length. One query, however long the history.
 */
async function matchTurn(
  db: Queryable,
  owner: ConversationOwner,
  history: readonly ClientMessage[],
) {
  const lengths: number[] = [];
  const hashes: string[] = [];
  let hash = "";
  history.forEach((message, i) => {
    hash = extendHash(hash, message);
    if (message.role === "assistant") {
      lengths.unshift(i + 1);
      hashes.unshift(hash);
    }
  });
  const found = await findTurn(db, owner, hashes);
  return found && { turn: found.turn, length: lengths[found.index] as number };
}

/**
 * The conversation where the turn goes on: the turn's own when it is the conversation's latest,
 * else a branch.
 */
async function continueAt(db: Queryable, turn: ChatTurn): Promise<ApiConversation | undefined> {
  const conversation = await getApiConversation(db, turn.conversationId);
  if (!conversation?.owner) return undefined;
  const latest = await lastTurn(db, conversation.id);
  if (latest?.turn === turn.turn && conversation.messageCount === turn.messageCount)
    return conversation;
  return (await branchApiConversation(db, { ...conversation, owner: conversation.owner }, turn))
    .conversation;
}

export async function planTurn(
  db: Queryable,
  who: Principal,
  chatModel: ChatModel,
  request: CompletionRequest,
  clientConversationId: string | null,
): Promise<PlannedTurn> {
  const { system, history, user } = split(request);
  const pullRequest = PR_COMMAND.test(user);
  if (pullRequest && !chatModel.repository) {
    throw badRequest("A pull request needs a repository: choose a vmpilot/<owner>/<repo> model.");
  }
  const repositoryId = chatModel.repository?.id ?? null;
  const askedHash = extendHash(history.reduce(extendHash, ""), { role: "user", text: user });
  const matched = await matchTurn(db, who, history);
  let conversation: ApiConversation | undefined;
  let unseen = history;
  if (matched) {
    const found = await continueAt(db, matched.turn);
    // A conversation moved to another model starts afresh there.
    if (found?.repositoryId === repositoryId) {
      conversation = found;
      unseen = history.slice(matched.length);
    }
  }
  if (!conversation && clientConversationId) {
    const named = await findClientConversation(db, who, clientConversationId);
    if (named?.repositoryId === repositoryId) {
      conversation = named;
      unseen = [];
    }
  }
  conversation ??= await createApiConversation(db, {
    owner: who,
    repositoryId,
    clientConversationId:
      clientConversationId && !(await findClientConversation(db, who, clientConversationId))
        ? clientConversationId
        : null,
  });
  return {
    conversation,
    instruction: sanitize(user.replace(PR_COMMAND, "")).trim(),
    system,
    askedHash,
    transcript: transcriptOf(unseen),
    pullRequest,
  };
}
