// Turns trigger deliveries into durable jobs: one transaction records the delivery ids (dedupe),
// the job rows and the queue entries, so a crash anywhere leaves either all of them or none.
// Deliveries arriving together share that transaction (group commit, see batcher.ts).
import type { PoolClient } from "pg";
import { CONTROL_VERBS } from "../jobs/queue/job-queue.ts";
import type { Queue } from "../jobs/queue/queue.ts";
import { traceparent } from "../log/trace.ts";
import { conversationKey, findOrCreateConversation } from "../store/conversations.ts";
import type { Database } from "../store/database.ts";
import { type Repository, upsertRepository } from "../store/installations.ts";
import { conversationLookupKey, recordAndLookUp } from "../store/intake-batch.ts";
import type { JobContext } from "../store/job-context.ts";
import { insertJobs, type JobTrigger, type NewJob } from "../store/jobs.ts";
import { type Commit, holdWrites, type Queryable, withTransaction } from "../store/sql.ts";
import { createBatcher } from "./batcher.ts";
import type { TriggerDelivery } from "./deliveries.ts";
import { type ParseResult, parseTrigger, type Trigger, type TriggerOptions } from "./trigger.ts";

export interface IntakeDeps {
  db: Database;
  queue: Pick<Queue, "enqueueJobs" | "wake">;
  appSlug: string;
  /** Defaults; a repository's settings may change the label. */
  label: string;
  command: string;
}

export type IntakeResult =
  | { jobId: number; trigger: Trigger }
  | { ignored: string }
  | { duplicate: true };

interface Pending {
  deliveryId: string;
  delivery: TriggerDelivery;
  parsed: ParseResult;
  /** The delivery's span, which its job's spans go under wherever the job runs. */
  traceparent: string | undefined;
}

export type RecordTrigger = (
  deliveryId: string,
  delivery: TriggerDelivery,
) => Promise<IntakeResult>;

export function createIntake(deps: IntakeDeps): RecordTrigger {
  const options: TriggerOptions = {
    appSlug: deps.appSlug,
    label: deps.label,
    command: deps.command,
  };
  // No waiting window: an idle server writes a delivery at once, and under load the deliveries
  // that arrive during a write form the next batch. Two batches in flight let one commit (fsync)
  // while the other is built; more only makes batches smaller and dearer per delivery (measured
  // with bench/intake.ts: 4 or 8 in flight lowered throughput and raised latency at both loads).
  const write = createBatcher((batch: Pending[]) => writeBatch(deps, options, batch), {
    maxSize: 200,
    maxInFlight: 2,
  });
  return async (deliveryId, delivery) => {
    const parsed = parseTrigger(delivery.input, options);
    // Most deliveries are not for us: answer them without touching the database. Only a label can
    // turn out to be a trigger once the repository's own label setting is known.
    const maybeLabel = delivery.input.action === "labeled" && "ignored" in parsed;
    if ("ignored" in parsed && !(maybeLabel && parsed.ignored === "no trigger")) return parsed;
    // Read here: a batch is written in the context of whichever delivery started it.
    return write({ deliveryId, delivery, parsed, traceparent: traceparent() });
  };
}

async function writeBatch(
  deps: IntakeDeps,
  options: TriggerOptions,
  batch: Pending[],
): Promise<IntakeResult[]> {
  const results = await withTransaction(deps.db.pool, (client, commit) =>
    recordBatch(client, commit, deps, options, batch),
  );
  // Committed: a worker in this process may take the jobs now instead of at its next poll.
  if (results.some((result) => "jobId" in result)) deps.queue.wake();
  return results;
}

async function recordBatch(
  client: PoolClient,
  commit: Commit,
  deps: IntakeDeps,
  options: TriggerOptions,
  batch: Pending[],
): Promise<IntakeResult[]> {
  const results: IntakeResult[] = batch.map(() => ({ duplicate: true }));
  const lookup = await recordAndLookUp(
    client,
    batch.map(({ deliveryId, delivery }) => ({
      id: deliveryId,
      event: delivery.input.event,
      action: delivery.input.action,
      installationId: delivery.installationId,
      repositoryId: delivery.repository.id,
      triggerKey: delivery.triggerKey,
    })),
    batch.map(({ delivery }) => ({
      repositoryId: delivery.repository.id,
      number: delivery.number,
    })),
  );
  const { fresh, conversations } = lookup;
  const upToDate = new Set<number>();
  const accepted: Array<{ index: number; trigger: Trigger; job: NewJob; notice: boolean }> = [];
  for (const [index, { deliveryId, delivery, parsed }] of batch.entries()) {
    // A delivery id or trigger event repeated within the batch is new only the first time.
    if (!fresh.delete(deliveryId)) continue;
    const repo = await knownRepository(client, lookup.repositories, upToDate, delivery);
    if (setting(repo, "enabled") === false) {
      results[index] = { ignored: "disabled for this repository" };
      continue;
    }
    const configured = setting(repo, "label");
    let label = typeof configured === "string" ? configured : deps.label;
    let result =
      label === deps.label ? parsed : parseTrigger(delivery.input, { ...options, label });
    const added = delivery.input.action === "labeled" ? delivery.input.label : undefined;
    if ("ignored" in result && added && !repo?.fileSettings) {
      // The worker has not read the file since it last changed, and it may name this label: the
      // worker reads it and drops the job silently if not.
      label = added;
      result = parseTrigger(delivery.input, { ...options, label });
    }
    if ("ignored" in result) {
      results[index] = result;
      continue;
    }
    // A conversation known before this trigger may have a job running: if so, this one's
    // acknowledgement must not wait for it (the notice finds out).
    const known = conversations.has(conversationLookupKey(delivery.repository.id, delivery.number));
    const conversationId = await conversationFor(client, conversations, delivery);
    const job = newJob(deps, delivery, deliveryId, result.trigger, conversationId, label);
    const control = CONTROL_VERBS.has(result.trigger.verb);
    accepted.push({ index, trigger: result.trigger, job, notice: known && !control });
  }
  if (accepted.length === 0) return results;
  const ids = lookup.jobIds.slice(0, accepted.length);
  const queued = accepted.map(({ index, trigger, job, notice }, n) => {
    const jobId = ids[n] as number;
    results[index] = { jobId, trigger };
    // stop, status and help must not wait for the conversation's running job to finish.
    const key = CONTROL_VERBS.has(trigger.verb)
      ? `${conversationKey(job.conversationId)}:job:${jobId}`
      : conversationKey(job.conversationId);
    return { jobId, conversationKey: key, notice, traceparent: batch[index]?.traceparent };
  });
  // The jobs, their queue entries and COMMIT go out together: one write, one round trip.
  let markSent = () => {};
  const sent = new Promise<void>((resolve) => {
    markSent = resolve;
  });
  const flush = holdWrites(client);
  try {
    const written = Promise.all([
      insertJobs(
        client,
        ids,
        accepted.map(({ job }) => job),
      ),
      deps.queue.enqueueJobs(client, queued, markSent),
    ]);
    await Promise.race([sent, written]);
    const committed = commit();
    flush();
    // A failed statement's own error, rather than the ROLLBACK its COMMIT turned into.
    await written;
    await committed;
  } finally {
    flush();
  }
  return results;
}

/** The stored repository, recorded or brought up to date from the delivery when needed. */
/** A setting as the job will see it: `.github/vmpilot.yml` over the settings page. */
function setting(repo: Repository | undefined, key: "enabled" | "label"): unknown {
  const file = repo?.fileSettings;
  return file && key in file ? file[key] : repo?.settings[key];
}

async function knownRepository(
  client: Queryable,
  stored: Map<number, Repository>,
  upToDate: Set<number>,
  delivery: TriggerDelivery,
): Promise<Repository | undefined> {
  const repo = delivery.repository;
  const known = stored.get(repo.id);
  if (upToDate.has(repo.id)) return known;
  upToDate.add(repo.id);
  // Upsert only when something changed: it locks the row, which would serialize every delivery
  // for a busy repository.
  if (
    !known ||
    known.fullName !== repo.fullName ||
    known.installationId !== delivery.installationId ||
    known.removedAt
  ) {
    await upsertRepository(client, {
      id: repo.id,
      installationId: delivery.installationId,
      fullName: repo.fullName,
      removed: false,
    });
  }
  return known;
}

async function conversationFor(
  client: Queryable,
  conversations: Map<string, number>,
  delivery: TriggerDelivery,
): Promise<number> {
  const key = conversationLookupKey(delivery.repository.id, delivery.number);
  let conversationId = conversations.get(key);
  if (conversationId === undefined) {
    // The first trigger on this issue or pull request.
    conversationId = (
      await findOrCreateConversation(client, {
        repositoryId: delivery.repository.id,
        number: delivery.number,
        kind: delivery.itemKind,
      })
    ).id;
    conversations.set(key, conversationId);
  }
  return conversationId;
}

function newJob(
  deps: IntakeDeps,
  delivery: TriggerDelivery,
  deliveryId: string,
  trigger: Trigger,
  conversationId: number,
  label: string,
): NewJob {
  const repo = delivery.repository;
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
    requesterId: delivery.requesterId,
    label,
    ...(trigger.unknownVerb ? { unknownVerb: trigger.unknownVerb } : {}),
  };
  return {
    conversationId,
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
    context,
  };
}

function jobTrigger(delivery: TriggerDelivery, trigger: Trigger): JobTrigger {
  if (delivery.input.event === "pull_request_review_comment") return "review_comment";
  if (delivery.input.event === "pull_request_review") return "review";
  return trigger.kind;
}
