// Which stored conversation a CLI invocation works in, held for it so no other run interleaves,
// and how a finished turn is written back.
import { hostname } from "node:os";
import type Anthropic from "@anthropic-ai/sdk";
import type pg from "pg";
import { loadConversation } from "../jobs/run/history.ts";
import {
  addCliTurn,
  type CliConversation,
  ConversationLockedError,
  createCliConversation,
  getCliConversation,
  listCliConversations,
  lockCliConversation,
  releaseCliConversation,
} from "../store/cli-conversations.ts";
import { saveCompaction } from "../store/compactions.ts";
import { isRunning } from "../store/data-dir-lock.ts";
import { appendMessage } from "../store/messages.ts";
import { type Queryable, withTransaction } from "../store/sql.ts";
import { UsageError } from "./args.ts";

type MessageParam = Anthropic.MessageParam;

/** Names this process in a conversation's lock. */
export const HOLDER = `${hostname()}:${process.pid}`;

/** A lock left by a process on this machine that is gone. */
function staleLock(lockedBy: string | null): boolean {
  if (!lockedBy) return false;
  const at = lockedBy.lastIndexOf(":");
  const pid = Number(lockedBy.slice(at + 1));
  return lockedBy.slice(0, at) === hostname() && pid > 0 && !isRunning(pid);
}

/** The first line of the first task, as `vmpilot conversations` shows it: no control characters. */
function titleOf(task: string): string {
  const line = task.trim().split("\n")[0] ?? "";
  return line
    .replace(/[\p{Cc}\p{Cf}]/gu, " ")
    .trim()
    .slice(0, 200);
}

/** A conversation this process holds (its lock), with the history it goes on from. */
export interface HeldConversation {
  conversation: CliConversation;
  history: MessageParam[];
  /** How many stored messages `history` stands for (a compaction stands for several). */
  storedCount: number;
}

export type ConversationChoice =
  | { kind: "new"; title: string; branch: (taken: ReadonlySet<string>) => Promise<string> }
  | { kind: "latest" }
  | { kind: "id"; id: number };

/**
 * Creates or takes the conversation. `repo` is where it belongs; a conversation picked by id
 * must belong there too, when the user named a repository.
 */
export async function openConversation(
  db: Queryable,
  repo: string | undefined,
  choice: ConversationChoice,
): Promise<HeldConversation> {
  let conversation: CliConversation | undefined;
  if (choice.kind === "new") {
    if (repo === undefined) throw new UsageError("missing --repo");
    const taken = new Set((await listCliConversations(db, repo)).map((c) => c.branch));
    const branch = await choice.branch(taken);
    conversation = await createCliConversation(db, {
      repo,
      branch,
      title: titleOf(choice.title),
      holder: HOLDER,
    });
    return { conversation, history: [], storedCount: 0 };
  }
  if (choice.kind === "latest") {
    if (repo === undefined) throw new UsageError("missing --repo");
    conversation = (await listCliConversations(db, repo))[0];
    if (!conversation) {
      throw new UsageError(`no conversation for ${repo} yet: run without --continue to start one`);
    }
  } else {
    conversation = await getCliConversation(db, choice.id);
    if (!conversation)
      throw new UsageError(`no conversation ${choice.id}: \`vmpilot conversations\` lists them`);
    if (repo !== undefined && conversation.repo !== repo) {
      throw new UsageError(
        `conversation ${conversation.id} belongs to ${conversation.repo}, not ${repo}`,
      );
    }
  }
  try {
    conversation = await lockCliConversation(
      db,
      conversation,
      HOLDER,
      staleLock(conversation.lockedBy),
    );
  } catch (error) {
    if (error instanceof ConversationLockedError) throw new UsageError(error.message);
    throw error;
  }
  const loaded = await loadConversation(db, conversation.id, null);
  return { conversation, history: loaded.messages, storedCount: loaded.storedCount };
}

/** What one turn adds to the conversation. */
export interface TurnRecord {
  messages: readonly MessageParam[];
  /** The last compaction during the turn, and how many of the turn's messages preceded it. */
  compaction?: { afterMessages: number; messages: MessageParam[] };
  costUsd: number;
}

/**
 * Stores a turn in one transaction: the conversation holds either all of it or none. Returns the
 * conversation as it now stands.
 */
export async function saveTurn(
  pool: pg.Pool,
  held: HeldConversation,
  turn: TurnRecord,
): Promise<CliConversation> {
  const id = held.conversation.id;
  await withTransaction(pool, async (db) => {
    for (const message of turn.messages) {
      await appendMessage(db, { conversationId: id, role: message.role, content: message.content });
    }
    if (turn.compaction) {
      await saveCompaction(db, id, {
        coveredMessages: held.storedCount + turn.compaction.afterMessages,
        messages: turn.compaction.messages,
      });
    }
    await addCliTurn(db, id, turn.costUsd);
  });
  held.storedCount += turn.messages.length;
  const now = await getCliConversation(pool, id);
  if (!now) throw new Error(`conversation ${id} vanished`);
  held.conversation = now;
  return now;
}

export async function releaseConversation(db: Queryable, held: HeldConversation) {
  await releaseCliConversation(db, held.conversation.id, HOLDER);
}
