// The small queues beside the job queue (notices, config checks, ready checks, automations): each
// message a short task that a throw retries, never held by a conversation's key. A side queue's
// module names it, says how its messages are retried, and parses them for the process's hook.
import type { Job as BossJob, PgBoss, QueueOptions } from "pg-boss";

export interface SideQueue<Hook> {
  name: string;
  options: QueueOptions & { notify?: boolean };
  /**
   * Enqueued inside callers' transactions: insert() looks the queue up in pg-boss's cache, on
   * pg-boss's own pool when it is not cached. On the embedded database that lookup would wait for
   * the transaction it is part of, so start() fills the cache (warmSideQueues).
   */
  inTransactions: boolean;
  /** The worker's function for one message, given the process's hook. */
  handler(hook: Hook): (message: BossJob<unknown>) => Promise<void>;
}

export async function createSideQueues(
  boss: PgBoss,
  sides: readonly SideQueue<never>[],
): Promise<void> {
  for (const side of sides) await boss.createQueue(side.name, side.options);
}

export async function warmSideQueues(
  boss: PgBoss,
  sides: readonly SideQueue<never>[],
): Promise<void> {
  // This call goes through the cache, filling it.
  for (const side of sides) if (side.inTransactions) await boss.insert(side.name, []);
}

/** Starts the side queue's worker when the process has a hook for it; resolves to its id. */
export async function workSideQueue<Hook>(
  boss: PgBoss,
  side: SideQueue<Hook>,
  hook: Hook | undefined,
  pollingIntervalSeconds: number,
): Promise<string | undefined> {
  if (!hook) return undefined;
  const handle = side.handler(hook);
  return boss.work(side.name, { pollingIntervalSeconds }, async ([message]) => {
    if (message) await handle(message);
  });
}
