// Conversations of the command-line face, keyed by the repository the user named and the branch
// the first run created.
import { z } from "zod";
import { PermanentError } from "../errors.ts";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored, row } from "./stored-value.ts";

const CliConversationRow = row({
  id: bigint,
  /** The repository (local_repo): a local path (absolute) or a git URL without credentials. */
  repo: z.string(),
  branch: z.string(),
  /** The first line of the first task. */
  title: z.string(),
  turns: z.number().int(),
  cost_usd: z.number(),
  message_count: z.number().int(),
  locked_by: z.string().nullable(),
  locked_at: z.date().nullable(),
  updated_at: z.date(),
});
export type CliConversation = z.output<typeof CliConversationRow>;

function toCliConversation(value: unknown): CliConversation {
  return parseStored(CliConversationRow, value, "a conversations row of the CLI");
}

/** Another run holds the conversation; it says who, so the user knows what to wait for. */
export class ConversationLockedError extends PermanentError {
  constructor(conversation: CliConversation) {
    super(
      `conversation ${conversation.id} is in use by ${conversation.lockedBy ?? "another run"} since ${conversation.lockedAt?.toISOString()}; wait for that run to end`,
    );
    this.name = "ConversationLockedError";
  }
}

const COLUMNS =
  "id, local_repo AS repo, branch, title, turns, cost_usd, message_count, locked_by, locked_at, updated_at";

/** Creates a conversation already held by `holder`. */
export async function createCliConversation(
  db: Queryable,
  input: { repo: string; branch: string; title: string; holder: string },
): Promise<CliConversation> {
  const { rows } = await db.query(
    `INSERT INTO conversations (kind, local_repo, branch, title, locked_by, locked_at)
     VALUES ('cli', $1, $2, $3, $4, now()) RETURNING ${COLUMNS}`,
    [input.repo, input.branch, input.title, input.holder],
  );
  return toCliConversation(rows[0]);
}

export async function getCliConversation(
  db: Queryable,
  id: number,
): Promise<CliConversation | undefined> {
  const { rows } = await db.query(
    `SELECT ${COLUMNS} FROM conversations WHERE id = $1 AND kind = 'cli'`,
    [id],
  );
  return rows[0] && toCliConversation(rows[0]);
}

/** The repository's conversations, the latest first. */
export async function listCliConversations(
  db: Queryable,
  repo: string,
): Promise<CliConversation[]> {
  const { rows } = await db.query(
    `SELECT ${COLUMNS} FROM conversations WHERE kind = 'cli' AND local_repo = $1
     ORDER BY updated_at DESC, id DESC`,
    [repo],
  );
  return rows.map(toCliConversation);
}

/**
 * Takes the conversation for `holder`. A lock whose holder is known to be gone (`stale`, as the
 * caller judged it) or older than a day is taken over; any other refuses with
 * ConversationLockedError.
 */
export async function lockCliConversation(
  db: Queryable,
  conversation: CliConversation,
  holder: string,
  stale: boolean,
): Promise<CliConversation> {
  const { rows } = await db.query(
    `UPDATE conversations SET locked_by = $2, locked_at = now()
     WHERE id = $1 AND (locked_by IS NULL OR locked_by = $2 OR ($3 AND locked_by = $4)
                        OR locked_at < now() - interval '1 day')
     RETURNING ${COLUMNS}`,
    [conversation.id, holder, stale, conversation.lockedBy],
  );
  if (rows[0]) return toCliConversation(rows[0]);
  const now = await getCliConversation(db, conversation.id);
  throw new ConversationLockedError(now ?? conversation);
}

/**
 * Lets the conversation go. One that never got a message (its run failed before the agent
 * started: no sandbox, a bad model) is removed, so it is neither listed nor continued.
 */
export async function releaseCliConversation(
  db: Queryable,
  id: number,
  holder: string,
): Promise<void> {
  await db.query(
    "DELETE FROM conversations WHERE id = $1 AND kind = 'cli' AND message_count = 0 AND locked_by = $2",
    [id, holder],
  );
  await db.query(
    "UPDATE conversations SET locked_by = NULL, locked_at = NULL WHERE id = $1 AND locked_by = $2",
    [id, holder],
  );
}

/** Counts a finished turn and what it cost. */
export async function addCliTurn(db: Queryable, id: number, costUsd: number): Promise<void> {
  await db.query(
    "UPDATE conversations SET turns = turns + 1, cost_usd = cost_usd + $2, updated_at = now() WHERE id = $1",
    [id, costUsd],
  );
}
