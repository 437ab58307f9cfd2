// Conversations of the chat face and their finished turns. A client sends the whole history with
// every request; a turn's history hash finds the conversation and the turn that history ends at.
import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored, queryRows, row } from "./stored-value.ts";

/**
 * Whose a conversation of the chat face is: the operator's key (VMPILOT_API_KEY), or a person's
 * key, by GitHub's numeric user id. A login can be anyone's; it is kept only to show.
 */
export type ConversationOwner = { kind: "operator" } | { kind: "user"; id: number; login: string };

const ApiConversationRow = row({
  id: bigint,
  api_owner: z.string(),
  api_operator: z.boolean(),
  api_owner_id: bigint.nullable(),
  /** Null on a scratch workspace. */
  repository_id: bigint.nullable(),
  client_conversation_id: z.string().nullable(),
  message_count: z.number().int(),
}).transform(({ apiOwner, apiOperator, apiOwnerId, ...conversation }) => ({
  ...conversation,
  /**
   * Null for a conversation stored before owners were ids whose owner could not be told: nobody's.
   */
  owner: ownerOf(apiOperator, apiOwnerId, apiOwner),
}));
export type ApiConversation = z.output<typeof ApiConversationRow>;

function ownerOf(operator: boolean, id: number | null, login: string): ConversationOwner | null {
  if (operator) return { kind: "operator" };
  return id === null ? null : { kind: "user", id, login };
}

const ChatTurnRow = row({
  conversation_id: bigint,
  turn: z.number().int(),
  job_id: bigint,
  history_hash: z.string(),
  /** The conversation's stored messages when the turn ended. */
  message_count: z.number().int(),
  commit_sha: z.string().nullable(),
  /** The workspace's commits since its base; null when it has none. */
  bundle: z.instanceof(Buffer).nullable(),
});
export type ChatTurn = z.output<typeof ChatTurnRow>;

/**
 * The SQL condition that a conversation (alias `c`) is the owner's, with its one parameter at `$n`
 * (null for the operator, so callers number the rest alike). The operator's conversations are told
 * by their flag, a person's by id; neither ever by a login.
 */
export function ownedBy(
  owner: ConversationOwner,
  n: number,
): { sql: string; param: number | null } {
  return owner.kind === "operator"
    ? { sql: `(c.api_operator AND $${n}::bigint IS NULL)`, param: null }
    : { sql: `c.api_owner_id = $${n}`, param: owner.id };
}

const ownerColumns = (owner: ConversationOwner) =>
  owner.kind === "operator"
    ? { login: "operator", operator: true, id: null }
    : { login: owner.login, operator: false, id: owner.id };

export async function getApiConversation(
  db: Queryable,
  id: number,
): Promise<ApiConversation | undefined> {
  const [conversation] = await queryRows(
    db,
    "SELECT * FROM conversations WHERE id = $1 AND kind = 'api'",
    [id],
    ApiConversationRow,
    `conversation ${id} of the chat face`,
  );
  return conversation;
}

export async function createApiConversation(
  db: Queryable,
  input: {
    owner: ConversationOwner;
    repositoryId: number | null;
    clientConversationId?: string | null;
  },
): Promise<ApiConversation> {
  const owner = ownerColumns(input.owner);
  const [conversation] = await queryRows(
    db,
    `INSERT INTO conversations (kind, api_owner, api_operator, api_owner_id, repository_id, client_conversation_id)
     VALUES ('api', $1, $2, $3, $4, $5)
     RETURNING *`,
    [owner.login, owner.operator, owner.id, input.repositoryId, input.clientConversationId ?? null],
    ApiConversationRow,
    "a new conversations row of the chat face",
  );
  if (!conversation) throw new Error("the conversations insert returned no row");
  return conversation;
}

/** The owner's conversation that a client named with its own id (Open WebUI's chat id). */
export async function findClientConversation(
  db: Queryable,
  owner: ConversationOwner,
  clientConversationId: string,
): Promise<ApiConversation | undefined> {
  const mine = ownedBy(owner, 2);
  const [conversation] = await queryRows(
    db,
    `SELECT * FROM conversations c WHERE kind = 'api' AND client_conversation_id = $1 AND ${mine.sql}`,
    [clientConversationId, mine.param],
    ApiConversationRow,
    "a conversations row of the chat face",
  );
  return conversation;
}

/**
 * The owner's turn whose conversation, reply included, hashes to one of `historyHashes`: the
 * earliest hash in the list that any turn has (callers put the longest history first), and of its
 * turns the newest. One query, however long the list.
 */
export async function findTurn(
  db: Queryable,
  owner: ConversationOwner,
  historyHashes: readonly string[],
): Promise<{ turn: ChatTurn; index: number } | undefined> {
  if (historyHashes.length === 0) return undefined;
  const mine = ownedBy(owner, 2);
  const { rows } = await db.query(
    `SELECT t.*, h.n - 1 AS hash_index
       FROM unnest($1::text[]) WITH ORDINALITY AS h (hash, n)
       JOIN chat_turns t ON t.history_hash = h.hash
       JOIN conversations c ON c.id = t.conversation_id
      WHERE c.kind = 'api' AND ${mine.sql}
      ORDER BY h.n, t.conversation_id DESC, t.turn DESC LIMIT 1`,
    [historyHashes, mine.param],
  );
  if (!rows[0]) return undefined;
  const index = parseStored(hashIndex, rows[0], "a chat_turns match").hash_index;
  return { turn: parseStored(ChatTurnRow, rows[0], "a chat_turns match"), index };
}

const hashIndex = z.object({ hash_index: bigint });

export async function lastTurn(
  db: Queryable,
  conversationId: number,
): Promise<ChatTurn | undefined> {
  const [turn] = await queryRows(
    db,
    "SELECT * FROM chat_turns WHERE conversation_id = $1 ORDER BY turn DESC LIMIT 1",
    [conversationId],
    ChatTurnRow,
    `the last chat_turns row of conversation ${conversationId}`,
  );
  return turn;
}

export async function saveChatTurn(db: Queryable, turn: Omit<ChatTurn, "turn">): Promise<number> {
  const [saved] = await queryRows(
    db,
    `INSERT INTO chat_turns (conversation_id, turn, job_id, history_hash, message_count, commit_sha, bundle)
     SELECT $1, coalesce(max(turn), 0) + 1, $2, $3, $4, $5, $6 FROM chat_turns WHERE conversation_id = $1
     RETURNING turn`,
    [
      turn.conversationId,
      turn.jobId,
      turn.historyHash,
      turn.messageCount,
      turn.commitSha,
      turn.bundle,
    ],
    z.object({ turn: z.number().int() }),
    "a new chat_turns row",
  );
  if (!saved) throw new Error("the chat_turns insert returned no row");
  return saved.turn;
}

/**
 * A new conversation holding `conversation` as it was when `turn` ended: its messages, their
 * images, compaction and turns up to there. Messages are append-only, so going back in a
 * conversation branches it.
 */
export async function branchApiConversation(
  db: Queryable,
  conversation: ApiConversation & { owner: ConversationOwner },
  turn: ChatTurn,
) {
  const copy = await createApiConversation(db, {
    owner: conversation.owner,
    repositoryId: conversation.repositoryId,
  });
  await db.query(
    `INSERT INTO messages (conversation_id, seq, role, content, job_id, created_at)
     SELECT $2, seq, role, content, job_id, created_at FROM messages
     WHERE conversation_id = $1 AND seq <= $3`,
    [conversation.id, copy.id, turn.messageCount],
  );
  await db.query("UPDATE conversations SET message_count = $2 WHERE id = $1", [
    copy.id,
    turn.messageCount,
  ]);
  // The copied messages show images by reference.
  await db.query(
    `INSERT INTO conversation_images (conversation_id, sha256, media_type, data, created_at)
     SELECT $2, sha256, media_type, data, created_at FROM conversation_images WHERE conversation_id = $1`,
    [conversation.id, copy.id],
  );
  await db.query(
    `INSERT INTO conversation_compactions (conversation_id, covered_messages, messages)
     SELECT $2, covered_messages, messages FROM conversation_compactions
     WHERE conversation_id = $1 AND covered_messages <= $3`,
    [conversation.id, copy.id, turn.messageCount],
  );
  await db.query(
    `INSERT INTO chat_turns (conversation_id, turn, job_id, history_hash, message_count, commit_sha, bundle)
     SELECT $2, turn, job_id, history_hash, message_count, commit_sha, bundle FROM chat_turns
     WHERE conversation_id = $1 AND turn <= $3`,
    [conversation.id, copy.id, turn.turn],
  );
  return {
    conversation: { ...copy, messageCount: turn.messageCount },
    turn: { ...turn, conversationId: copy.id },
  };
}
