// Turns a trigger delivery into a durable job: one transaction records the delivery id (dedupe),
// the job row and the queue entry, so a crash anywhere leaves either all of them or none.
import type { JobContext } from "../github/job-context.ts";
import { CONTROL_VERBS } from "../jobs/acknowledge.ts";
import type { Queue } from "../jobs/queue.ts";
import { chatKey, findOrCreateChat } from "../store/chats.ts";
import type { Database } from "../store/database.ts";
import { recordDelivery } from "../store/deliveries.ts";
import { getRepository, upsertRepository } from "../store/installations.ts";
import { insertJob, type JobTrigger } from "../store/jobs.ts";
import { withTransaction } from "../store/sql.ts";
import type { TriggerDelivery } from "./deliveries.ts";
import { parseTrigger, type Trigger, type TriggerOptions } from "./trigger.ts";

export interface IntakeDeps {
  db: Database;
  queue: Pick<Queue, "enqueueJob" | "wake">;
  appSlug: string;
  /** Defaults; a repository's settings may change the label. */
  label: string;
  command: string;
}

export type IntakeResult =
  | { jobId: number; trigger: Trigger }
  | { ignored: string }
  | { duplicate: true };

export async function recordTrigger(
  deps: IntakeDeps,
  deliveryId: string,
  delivery: TriggerDelivery,
): Promise<IntakeResult> {
  const options: TriggerOptions = { appSlug: deps.appSlug, label: deps.label, command: deps.command };
  const first = parseTrigger(delivery.input, options);
  // Most deliveries are not for us: answer them without touching the database. Only a label can
  // turn out to be a trigger once the repository's own label setting is known.
  const maybeLabel = delivery.input.action === "labeled" && "ignored" in first;
  if ("ignored" in first && !(maybeLabel && first.ignored === "no trigger")) return first;

  const result = await withTransaction(deps.db.pool, async (client): Promise<IntakeResult> => {
    const repo = delivery.repository;
    const fresh = await recordDelivery(client, {
      id: deliveryId,
      event: delivery.input.event,
      action: delivery.input.action,
      installationId: delivery.installationId,
      repositoryId: repo.id,
    });
    if (!fresh) return { duplicate: true };
    const stored = await getRepository(client, repo.id);
    // Upsert only when something changed: the upsert locks the row, which would serialize every
    // delivery for a busy repository.
    if (
      !stored ||
      stored.fullName !== repo.fullName ||
      stored.installationId !== delivery.installationId ||
      stored.removedAt
    ) {
      await upsertRepository(client, {
        id: repo.id,
        installationId: delivery.installationId,
        fullName: repo.fullName,
        removed: false,
      });
    }
    const settings = stored?.settings ?? {};
    if (settings.enabled === false) return { ignored: "disabled for this repository" };
    const label = typeof settings.label === "string" ? settings.label : deps.label;
    const parsed = label === deps.label ? first : parseTrigger(delivery.input, { ...options, label });
    if ("ignored" in parsed) return parsed;
    const { trigger } = parsed;
    const chat = await findOrCreateChat(client, {
      repositoryId: repo.id,
      number: delivery.number,
      kind: delivery.itemKind,
    });
    const context: JobContext = {
      owner: repo.owner,
      name: repo.name,
      itemKind: delivery.itemKind,
      title: delivery.title,
      htmlUrl: delivery.htmlUrl,
      cloneUrl: repo.cloneUrl,
      defaultBranch: repo.defaultBranch,
      target: delivery.target,
      appSlug: deps.appSlug,
      command: deps.command,
      label,
      ...(trigger.unknownVerb ? { unknownVerb: trigger.unknownVerb } : {}),
    };
    const job = await insertJob(client, {
      chatId: chat.id,
      installationId: delivery.installationId,
      repositoryId: repo.id,
      repo: repo.fullName,
      number: delivery.number,
      trigger: jobTrigger(delivery, trigger),
      command: trigger.verb,
      requester: delivery.requester,
      instruction: trigger.instruction,
      triggerCommentId: "id" in delivery.target ? delivery.target.id : null,
      deliveryId,
      context: context as unknown as Record<string, unknown>,
    });
    // stop, status and help must not wait for the chat's running job to finish.
    const key = CONTROL_VERBS.has(trigger.verb)
      ? `${chatKey(chat.id)}:job:${job.id}`
      : chatKey(chat.id);
    await deps.queue.enqueueJob(client, { jobId: job.id, chatKey: key });
    return { jobId: job.id, trigger };
  });
  if ("jobId" in result) deps.queue.wake();
  return result;
}

function jobTrigger(delivery: TriggerDelivery, trigger: Trigger): JobTrigger {
  if (delivery.input.event === "pull_request_review_comment") return "review_comment";
  if (delivery.input.event === "pull_request_review") return "review";
  return trigger.kind;
}
