// Conversations of the chat face and their finished turns. A client sends the whole history with
// every request; a turn's history hash finds the chat and the turn that history ends at.
import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored } from "./stored-value.ts";

export interface ApiChat {
  id: number;
  /** The key owner's login, or "operator". */
  owner: string;
  /** Null on a scratch workspace. */
  repositoryId: number | null;
  clientChatId: string | null;
  messageCount: number;
}

export interface ChatTurn {
  chatId: number;
  turn: number;
  jobId: number;
  historyHash: string;
  /** The chat's stored messages when the turn ended. */
  messageCount: number;
  commitSha: string | null;
  /** The workspace's commits since its base; null when it has none. */
  bundle: Buffer | null;
}

const chatRow = z.object({
  id: bigint,
  api_owner: z.string(),
  repository_id: bigint.nullable(),
  client_chat_id: z.string().nullable(),
  message_count: z.number().int(),
});

const turnRow = z.object({
  chat_id: bigint,
  turn: z.number().int(),
  job_id: bigint,
  history_hash: z.string(),
  message_count: z.number().int(),
  commit_sha: z.string().nullable(),
  bundle: z.instanceof(Buffer).nullable(),
});

function toChat(value: unknown): ApiChat {
  const r = parseStored(chatRow, value, "a chats row of the chat face");
  return {
    id: r.id,
    owner: r.api_owner,
    repositoryId: r.repository_id,
    clientChatId: r.client_chat_id,
    messageCount: r.message_count,
  };
}

function toTurn(value: unknown): ChatTurn {
  const r = parseStored(turnRow, value, "a chat_turns row");
  return {
    chatId: r.chat_id,
    turn: r.turn,
    jobId: r.job_id,
    historyHash: r.history_hash,
    messageCount: r.message_count,
    commitSha: r.commit_sha,
    bundle: r.bundle,
  };
}

export async function getApiChat(db: Queryable, id: number): Promise<ApiChat | undefined> {
  const { rows } = await db.query("SELECT * FROM chats WHERE id = $1 AND kind = 'api'", [id]);
  return rows[0] && toChat(rows[0]);
}

export async function createApiChat(
  db: Queryable,
  input: { owner: string; repositoryId: number | null; clientChatId?: string | null },
): Promise<ApiChat> {
  const { rows } = await db.query(
    `INSERT INTO chats (kind, api_owner, repository_id, client_chat_id) VALUES ('api', $1, $2, $3)
     RETURNING *`,
    [input.owner, input.repositoryId, input.clientChatId ?? null],
  );
  return toChat(rows[0]);
}

/** The owner's chat that a client named with its own id (Open WebUI's chat id). */
export async function findClientChat(
  db: Queryable,
  owner: string,
  clientChatId: string,
): Promise<ApiChat | undefined> {
  const { rows } = await db.query(
    "SELECT * FROM chats WHERE kind = 'api' AND api_owner = $1 AND client_chat_id = $2",
    [owner, clientChatId],
  );
  return rows[0] && toChat(rows[0]);
}

/** The owner's turn whose conversation, reply included, hashes to `historyHash`; newest first. */
export async function findTurn(
  db: Queryable,
  owner: string,
  historyHash: string,
  chatId?: number,
): Promise<ChatTurn | undefined> {
  const { rows } = await db.query(
    `SELECT t.* FROM chat_turns t JOIN chats c ON c.id = t.chat_id
     WHERE t.history_hash = $1 AND c.api_owner = $2 AND ($3::bigint IS NULL OR c.id = $3)
     ORDER BY t.chat_id DESC, t.turn DESC LIMIT 1`,
    [historyHash, owner, chatId ?? null],
  );
  return rows[0] && toTurn(rows[0]);
}

export async function lastTurn(db: Queryable, chatId: number): Promise<ChatTurn | undefined> {
  const { rows } = await db.query(
    "SELECT * FROM chat_turns WHERE chat_id = $1 ORDER BY turn DESC LIMIT 1",
    [chatId],
  );
  return rows[0] && toTurn(rows[0]);
}

export async function saveChatTurn(db: Queryable, turn: Omit<ChatTurn, "turn">): Promise<number> {
  const { rows } = await db.query<{ turn: number }>(
    `INSERT INTO chat_turns (chat_id, turn, job_id, history_hash, message_count, commit_sha, bundle)
     SELECT $1, coalesce(max(turn), 0) + 1, $2, $3, $4, $5, $6 FROM chat_turns WHERE chat_id = $1
     RETURNING turn`,
    [turn.chatId, turn.jobId, turn.historyHash, turn.messageCount, turn.commitSha, turn.bundle],
  );
  return Number(rows[0]?.turn);
}

/**
 * A new chat holding `chat` as it was when `turn` ended: its messages, compaction and turns up to
 * there. Messages are append-only, so going back in a conversation branches it.
 */
export async function branchApiChat(db: Queryable, chat: ApiChat, turn: ChatTurn) {
  const copy = await createApiChat(db, { owner: chat.owner, repositoryId: chat.repositoryId });
  await db.query(
    `INSERT INTO messages (chat_id, seq, role, content, job_id, created_at)
     SELECT $2, seq, role, content, job_id, created_at FROM messages
     WHERE chat_id = $1 AND seq <= $3`,
    [chat.id, copy.id, turn.messageCount],
  );
  await db.query("UPDATE chats SET message_count = $2 WHERE id = $1", [copy.id, turn.messageCount]);
  await db.query(
    `INSERT INTO chat_compactions (chat_id, covered_messages, messages)
     SELECT $2, covered_messages, messages FROM chat_compactions
     WHERE chat_id = $1 AND covered_messages <= $3`,
    [chat.id, copy.id, turn.messageCount],
  );
  await db.query(
    `INSERT INTO chat_turns (chat_id, turn, job_id, history_hash, message_count, commit_sha, bundle)
     SELECT $2, turn, job_id, history_hash, message_count, commit_sha, bundle FROM chat_turns
     WHERE chat_id = $1 AND turn <= $3`,
    [chat.id, copy.id, turn.turn],
  );
  return { chat: { ...copy, messageCount: turn.messageCount }, turn: { ...turn, chatId: copy.id } };
}
