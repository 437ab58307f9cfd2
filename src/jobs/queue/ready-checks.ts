// Checks whether vmpilot's pull request is ready for review (ready.ts): short, never held by a key.
import type { PgBoss } from "pg-boss";
import { z } from "zod";
import { prepared, type Queryable } from "../../store/sql.ts";
import type { SideQueue } from "./side-queue.ts";

const ReadyCheckData = z.object({
  conversationId: z.number().int(),
  /** The head vmpilot pushed; a later push makes the check moot. */
  sha: z.string(),
  /** Without any check suite on the head, the pull request is ready once this check runs. */
  grace: z.boolean(),
});
export type ReadyCheck = z.infer<typeof ReadyCheckData>;

/** Checks queued before migration 023 name their conversation chatId. */
const QueuedReadyCheck = z.union([
  ReadyCheckData,
  ReadyCheckData.omit({ conversationId: true })
    .extend({ chatId: z.number().int() })
    .transform(({ chatId, ...check }) => ({ ...check, conversationId: chatId })),
]);

/** Runs the ready-for-review checks; a throw retries the check. */
export type ReadyHook = (check: ReadyCheck, signal: AbortSignal) => Promise<void>;

export const readyChecks: SideQueue<ReadyHook> = {
  name: "vmpilot-ready",
  options: { retryLimit: 3, retryDelay: 10, retryBackoff: true, notify: false },
  inTransactions: true,
  handler: (onReady) => (check) => onReady(QueuedReadyCheck.parse(check.data), check.signal),
};

export async function enqueueReady(
  boss: PgBoss,
  check: ReadyCheck,
  { db, delaySeconds = 0 }: { db?: Queryable; delaySeconds?: number } = {},
): Promise<void> {
  const job = { data: check, startAfter: new Date(Date.now() + delaySeconds * 1000) };
  const inTransaction = db && {
    executeSql: (text: string, values?: unknown[]) => db.query(prepared(db, text, values ?? [])),
  };
  await boss.insert(readyChecks.name, [job], inTransaction ? { db: inTransaction } : {});
}
