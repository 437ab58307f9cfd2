// Conversations of the chat face and their finished turns. A client sends the whole history with
// every request; a turn's history hash finds the chat and the turn that history ends at.
import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored } from "./stored-value.ts";

/**
 * Whose a chat of the chat face is: the operator's key (VMPILOT_API_KEY), or a person's key, by
 * GitHub's numeric user id. A login can be anyone's; it is kept only to show.
 */
export type ChatOwner = { kind: "operator" } | { kind: "user"; id: number; login: string };

export interface ApiChat {
  id: number;
  /** Null for a chat stored before owners were ids whose owner could not be told: nobody's. */
  owner: ChatOwner | null;
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
  api_operator: z.boolean(),
  api_owner_id: bigint.nullable(),
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
  const owner: ChatOwner | null = r.api_operator
    ? { kind: "operator" }
    : r.api_owner_id === null
      ? null
      : { kind: "user", id: r.api_owner_id, login: r.api_owner };
  return {
    id: r.id,
    owner,
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

/**
 * The SQL condition that a chat (alias `c`) is the owner's, with its one parameter at `$n` (null
 * for the operator, so callers number the rest alike). The operator's chats are told by their
 * flag, a person's by id; neither ever by a login.
 */
export function ownedBy(owner: ChatOwner, n: number): { sql: string; param: number | null } {
  return owner.kind === "operator"
    ? { sql: `(c.api_operator AND $${n}::bigint IS NULL)`, param: null }
    : { sql: `c.api_owner_id = $${n}`, param: owner.id };
}

const ownerColumns = (owner: ChatOwner) =>
  owner.kind === "operator"
    ? { login: "operator", operator: true, id: null }
    : { login: owner.login, operator: false, id: owner.id };

export async function getApiChat(db: Queryable, id: number): Promise<ApiChat | undefined> {
  const { rows } = await db.query("SELECT * FROM chats WHERE id = $1 AND kind = 'api'", [id]);
  return rows[0] && toChat(rows[0]);
}

export async function createApiChat(
  db: Queryable,
  input: { owner: ChatOwner; repositoryId: number | null; clientChatId?: string | null },
): Promise<ApiChat> {
  const owner = ownerColumns(input.owner);
  const { rows } = await db.query(
    `INSERT INTO chats (kind, api_owner, api_operator, api_owner_id, repository_id, client_chat_id)
     VALUES ('api', $1, $2, $3, $4, $5)
     RETURNING *`,
    [owner.login, owner.operator, owner.id, input.repositoryId, input.clientChatId ?? null],
  );
  return toChat(rows[0]);
}

/** The owner's chat that a client named with its own id (Open WebUI's chat id). */
export async function findClientChat(
  db: Queryable,
  owner: ChatOwner,
  clientChatId: string,
): Promise<ApiChat | undefined> {
  const mine = ownedBy(owner, 2);
  const { rows } = await db.query(
    `SELECT * FROM chats c WHERE kind = 'api' AND client_chat_id = $1 AND ${mine.sql}`,
    [clientChatId, mine.param],
  );
  return rows[0] && toChat(rows[0]);
}

/**
 * The owner's turn whose conversation, reply included, hashes to one of `historyHashes`: the
 * earliest hash in the list that any turn has (callers put the longest history first), and of its
 * turns the newest. One query, however long the list.
 */
export async function findTurn(
  db: Queryable,
  owner: ChatOwner,
  historyHashes: readonly string[],
): Promise<{ turn: ChatTurn; index: number } | undefined> {
  if (historyHashes.length === 0) return undefined;
  const mine = ownedBy(owner, 2);
  const { rows } = await db.query(
    `SELECT t.*, h.n - 1 AS hash_index
       FROM unnest($1::text[]) WITH ORDINALITY AS h (hash, n)
       JOIN chat_turns t ON t.history_hash = h.hash
       JOIN chats c ON c.id = t.chat_id
      WHERE c.kind = 'api' AND ${mine.sql}
      ORDER BY h.n, t.chat_id DESC, t.turn DESC LIMIT 1`,
    [historyHashes, mine.param],
  );
  if (!rows[0]) return undefined;
  const index = parseStored(hashIndex, rows[0], "a chat_turns match").hash_index;
  return { turn: toTurn(rows[0]), index };
}

const hashIndex = z.object({ hash_index: bigint });

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
 * A new chat holding `chat` as it was when `turn` ended: its messages, their images, compaction and
 * turns up to there. Messages are append-only, so going back in a conversation branches it.
 */
export async function branchApiChat(
  db: Queryable,
  chat: ApiChat & { owner: ChatOwner },
  turn: ChatTurn,
) {
  const copy = await createApiChat(db, { owner: chat.owner, repositoryId: chat.repositoryId });
  await db.query(
    `INSERT INTO messages (chat_id, seq, role, content, job_id, created_at)
     SELECT $2, seq, role, content, job_id, created_at FROM messages
     WHERE chat_id = $1 AND seq <= $3`,
    [chat.id, copy.id, turn.messageCount],
  );
  await db.query("UPDATE chats SET message_count = $2 WHERE id = $1", [copy.id, turn.messageCount]);
  // The copied messages show images by reference.
  await db.query(
    `INSERT INTO chat_images (chat_id, sha256, media_type, data, created_at)
     SELECT $2, sha256, media_type, data, created_at FROM chat_images WHERE chat_id = $1`,
    [chat.id, copy.id],
  );
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
