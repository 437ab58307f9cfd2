// Conversations of the command-line face, keyed by the repository the user named and the branch
// the first run created.
import { z } from "zod";
import { PermanentError } from "../errors.ts";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored } from "./stored-value.ts";

export interface CliChat {
  id: number;
  /** The repository: a local path (absolute) or a git URL without credentials. */
  repo: string;
  branch: string;
  /** The first line of the first task. */
  title: string;
  turns: number;
  costUsd: number;
  messageCount: number;
  lockedBy: string | null;
  lockedAt: Date | null;
  updatedAt: Date;
}

const row = z.object({
  id: bigint,
  local_repo: z.string(),
  branch: z.string(),
  title: z.string(),
  turns: z.number().int(),
  cost_usd: z.number(),
  message_count: z.number().int(),
  locked_by: z.string().nullable(),
  locked_at: z.date().nullable(),
  updated_at: z.date(),
});

function toCliChat(value: unknown): CliChat {
  const r = parseStored(row, value, "a chats row of the CLI");
  return {
    id: r.id,
    repo: r.local_repo,
    branch: r.branch,
    title: r.title,
    turns: r.turns,
    costUsd: r.cost_usd,
    messageCount: r.message_count,
    lockedBy: r.locked_by,
    lockedAt: r.locked_at,
    updatedAt: r.updated_at,
  };
}

/** Another run holds the conversation; it says who, so the user knows what to wait for. */
export class ChatLockedError extends PermanentError {
  constructor(chat: CliChat) {
    super(
      `conversation ${chat.id} is in use by ${chat.lockedBy ?? "another run"} since ${chat.lockedAt?.toISOString()}; wait for that run to end`,
    );
    this.name = "ChatLockedError";
  }
}

const COLUMNS =
  "id, local_repo, branch, title, turns, cost_usd, message_count, locked_by, locked_at, updated_at";

/** Creates a conversation already held by `holder`. */
export async function createCliChat(
  db: Queryable,
  input: { repo: string; branch: string; title: string; holder: string },
): Promise<CliChat> {
  const { rows } = await db.query(
    `INSERT INTO chats (kind, local_repo, branch, title, locked_by, locked_at)
     VALUES ('cli', $1, $2, $3, $4, now()) RETURNING ${COLUMNS}`,
    [input.repo, input.branch, input.title, input.holder],
  );
  return toCliChat(rows[0]);
}

export async function getCliChat(db: Queryable, id: number): Promise<CliChat | undefined> {
  const { rows } = await db.query(`SELECT ${COLUMNS} FROM chats WHERE id = $1 AND kind = 'cli'`, [
    id,
  ]);
  return rows[0] && toCliChat(rows[0]);
}

/** The repository's conversations, the latest first. */
export async function listCliChats(db: Queryable, repo: string): Promise<CliChat[]> {
  const { rows } = await db.query(
    `SELECT ${COLUMNS} FROM chats WHERE kind = 'cli' AND local_repo = $1
     ORDER BY updated_at DESC, id DESC`,
    [repo],
  );
  return rows.map(toCliChat);
}

/**
 * Takes the conversation for `holder`. A lock whose holder is known to be gone (`stale`, as the
 * caller judged it) or older than a day is taken over; any other refuses with ChatLockedError.
 */
export async function lockCliChat(
  db: Queryable,
  chat: CliChat,
  holder: string,
  stale: boolean,
): Promise<CliChat> {
  const { rows } = await db.query(
    `UPDATE chats SET locked_by = $2, locked_at = now()
     WHERE id = $1 AND (locked_by IS NULL OR locked_by = $2 OR ($3 AND locked_by = $4)
                        OR locked_at < now() - interval '1 day')
     RETURNING ${COLUMNS}`,
    [chat.id, holder, stale, chat.lockedBy],
  );
  if (rows[0]) return toCliChat(rows[0]);
  const now = await getCliChat(db, chat.id);
  throw new ChatLockedError(now ?? chat);
}

/**
 * Lets the conversation go. One that never got a message (its run failed before the agent
 * started: no sandbox, a bad model) is removed, so it is neither listed nor continued.
 */
export async function releaseCliChat(db: Queryable, id: number, holder: string): Promise<void> {
  await db.query(
    "DELETE FROM chats WHERE id = $1 AND kind = 'cli' AND message_count = 0 AND locked_by = $2",
    [id, holder],
  );
  await db.query(
    "UPDATE chats SET locked_by = NULL, locked_at = NULL WHERE id = $1 AND locked_by = $2",
    [id, holder],
  );
}

/** Counts a finished turn and what it cost. */
export async function addCliTurn(db: Queryable, id: number, costUsd: number): Promise<void> {
  await db.query(
    "UPDATE chats SET turns = turns + 1, cost_usd = cost_usd + $2, updated_at = now() WHERE id = $1",
    [id, costUsd],
  );
}
