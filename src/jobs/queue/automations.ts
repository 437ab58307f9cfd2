// The repositories' automations (automations.ts): the fires of their schedules, which pg-boss's
// scheduler sends once per slot across all processes, and re-reads of their files. Short, never
// held by a key.
import type { PgBoss } from "pg-boss";
import { z } from "zod";
import type { SideQueue } from "./side-queue.ts";

const AutomationData = z.discriminatedUnion("kind", [
  /** A schedule's slot came: run the automation, if the file still says so. */
  z.object({
    kind: z.literal("schedule"),
    repositoryId: z.number().int(),
    name: z.string(),
    cron: z.string(),
  }),
  /** The file may have changed: read it and set the schedules (of one repository, or of all). */
  z.object({
    kind: z.literal("sync"),
    installationId: z.number().int(),
    repositoryId: z.number().int().optional(),
  }),
]);
export type AutomationMessage = z.infer<typeof AutomationData>;
export type AutomationSync = Extract<AutomationMessage, { kind: "sync" }>;

/** One of a repository's scheduled automations. */
export interface ScheduledAutomation {
  name: string;
  /** Five-field cron, UTC. */
  cron: string;
}

/**
 * Runs the automation messages; `id` is the message's own, the same on a retry. A throw retries
 * the message.
 */
export type AutomationHook = (
  message: AutomationMessage,
  id: string,
  signal: AbortSignal,
) => Promise<void>;

export const automationQueue: SideQueue<AutomationHook> = {
  name: "vmpilot-automations",
  options: { retryLimit: 3, retryDelay: 10, retryBackoff: true, notify: false },
  inTransactions: false,
  handler: (onAutomation) => (message) =>
    onAutomation(AutomationData.parse(message.data), message.id, message.signal),
};

const QUEUE = automationQueue.name;

/** Schedules are keyed by repository and automation: `<repositoryId>/<name>`. */
const scheduleKey = (repositoryId: number, name: string) => `${repositoryId}/${name}`;

export async function enqueueAutomationSync(
  boss: PgBoss,
  sync: Omit<AutomationSync, "kind">,
): Promise<void> {
  await boss.send(QUEUE, { kind: "sync", ...sync });
}

export async function setSchedules(
  boss: PgBoss,
  repositoryId: number,
  wanted: readonly ScheduledAutomation[],
): Promise<void> {
  const prefix = scheduleKey(repositoryId, "");
  const existing = (await boss.getSchedules(QUEUE)).filter((schedule) =>
    schedule.key.startsWith(prefix),
  );
  for (const schedule of existing) {
    if (!wanted.some((w) => scheduleKey(repositoryId, w.name) === schedule.key)) {
      await boss.unschedule(QUEUE, schedule.key);
    }
  }
  for (const { name, cron } of wanted) {
    const key = scheduleKey(repositoryId, name);
    if (existing.some((schedule) => schedule.key === key && schedule.cron === cron)) continue;
    // An upsert: a changed expression replaces the old one under the same key.
    const data: AutomationMessage = { kind: "schedule", repositoryId, name, cron };
    await boss.schedule(QUEUE, cron, data, { tz: "UTC", key });
  }
}

export async function scheduledRepositories(boss: PgBoss): Promise<number[]> {
  const schedules = await boss.getSchedules(QUEUE);
  const ids = schedules.map((schedule) => Number(schedule.key.split("/")[0]));
  return [...new Set(ids.filter(Number.isSafeInteger))];
}
