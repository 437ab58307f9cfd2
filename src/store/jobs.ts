import type pg from "pg";
import { z } from "zod";
import { PermanentError } from "../errors.ts";
import { type ConversationOwner, ownedBy } from "./api-conversations.ts";
import { jobSpender, spenderJobs } from "./spenders.ts";
import { prepared, type Queryable, withTransaction } from "./sql.ts";
import { bigint, queryRows } from "./stored-value.ts";

const JOB_STATUSES = [
  "queued",
  "running",
  "acknowledged",
  "refused",
  "ignored",
  "succeeded",
  "failed",
  "cancelled",
  "dead",
] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** Statuses after which the queue is done with a job; setting one stamps finished_at. */
const FINAL_STATUSES: readonly JobStatus[] = [
  "refused",
  "ignored",
  "succeeded",
  "failed",
  "cancelled",
  "dead",
];

/**
 * What started a job. base_push and ci are the app's own (the base of the conversation's pull
 * request moved; a check failed on the head vmpilot pushed last); chat is a turn of the chat face
 * (no installation, repository or item on scratch); automation is a run of one of the repository's
 * automations (jobs.context.automation names it), on the issue that started it or, on a schedule,
 * on no item.
 */
const JOB_TRIGGERS = [
  "label",
  "assigned",
  "mention",
  "command",
  "review",
  "review_comment",
  "base_push",
  "ci",
  "chat",
  "automation",
] as const;
export type JobTrigger = (typeof JOB_TRIGGERS)[number];

export interface Job {
  id: number;
  conversationId: number;
  /** Null only for a chat turn on a scratch workspace. */
  installationId: number | null;
  repositoryId: number | null;
  /** owner/name when the job was triggered; "scratch" for a chat turn without a repository. */
  repo: string;
  /** The issue or pull request the trigger was on; null for a chat turn. */
  number: number | null;
  trigger: JobTrigger;
  /** The command verb (fix, plan, review, ...), null for a plain label or mention. */
  command: string | null;
  requester: string;
  instruction: string;
  status: JobStatus;
  branch: string | null;
  prNumber: number | null;
  triggerCommentId: number | null;
  progressCommentId: number | null;
  deliveryId: string | null;
  context: Record<string, unknown>;
  error: string | null;
  attempts: number;
  cancelRequestedAt: Date | null;
  /** Set when a notice claimed the job's first comment while it waited (acknowledgeWaiting). */
  noticedAt: Date | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  updatedAt: Date;
  usage: Record<string, unknown>;
  costUsd: number;
}

/** A job on a GitHub issue or pull request: every job but a chat turn. */
export type IssueJob = Job & { installationId: number; repositoryId: number; number: number };

export function isIssueJob(job: Job): job is IssueJob {
  return job.installationId !== null && job.repositoryId !== null && job.number !== null;
}

export interface NewJob {
  conversationId: number;
  installationId: number | null;
  repositoryId: number | null;
  repo: string;
  number: number | null;
  trigger: JobTrigger;
  command?: string | null;
  requester: string;
  instruction?: string;
  triggerCommentId?: number | null;
  deliveryId?: string | null;
  context?: Record<string, unknown>;
  branch?: string | null;
  prNumber?: number | null;
}

export interface JobPatch {
  status?: JobStatus;
  branch?: string | null;
  prNumber?: number | null;
  progressCommentId?: number | null;
  error?: string | null;
  context?: Record<string, unknown>;
  usage?: Record<string, unknown>;
  costUsd?: number;
  startedAt?: Date | null;
  finishedAt?: Date | null;
}

const JobRow = z
  .object({
    id: bigint,
    conversation_id: bigint,
    installation_id: bigint.nullable(),
    repository_id: bigint.nullable(),
    repo: z.string(),
    number: z.number().int().nullable(),
    trigger: z.enum(JOB_TRIGGERS),
    command: z.string().nullable(),
    requester: z.string(),
    instruction: z.string(),
    status: z.enum(JOB_STATUSES),
    branch: z.string().nullable(),
    pr_number: z.number().int().nullable(),
    trigger_comment_id: bigint.nullable(),
    progress_comment_id: bigint.nullable(),
    delivery_id: z.string().nullable(),
    context: z.record(z.string(), z.unknown()),
    error: z.string().nullable(),
    attempts: z.number().int(),
    cancel_requested_at: z.date().nullable(),
    noticed_at: z.date().nullable(),
    created_at: z.date(),
    started_at: z.date().nullable(),
    finished_at: z.date().nullable(),
    updated_at: z.date(),
    usage: z.record(z.string(), z.unknown()),
    cost_usd: z.union([z.string(), z.number()]).transform(Number),
  })
  .transform(
    (row): Job => ({
      id: row.id,
      conversationId: row.conversation_id,
      installationId: row.installation_id,
      repositoryId: row.repository_id,
      repo: row.repo,
      number: row.number,
      trigger: row.trigger,
      command: row.command,
      requester: row.requester,
      instruction: row.instruction,
      status: row.status,
      branch: row.branch,
      prNumber: row.pr_number,
      triggerCommentId: row.trigger_comment_id,
      progressCommentId: row.progress_comment_id,
      deliveryId: row.delivery_id,
      context: row.context,
      error: row.error,
      attempts: row.attempts,
      cancelRequestedAt: row.cancel_requested_at,
      noticedAt: row.noticed_at,
      createdAt: row.created_at,
      startedAt: row.started_at,
      finishedAt: row.finished_at,
      updatedAt: row.updated_at,
      usage: row.usage,
      costUsd: row.cost_usd,
    }),
  );

// How a NewJob fills the jobs table, for the one-row and the many-row insert: column, array type
// for unnest, and the value.
const NEW_JOB_COLUMNS: ReadonlyArray<[string, string, (job: NewJob) => unknown]> = [
  ["conversation_id", "bigint", (j) => j.conversationId],
  ["installation_id", "bigint", (j) => j.installationId],
  ["repository_id", "bigint", (j) => j.repositoryId],
  ["repo", "text", (j) => j.repo],
  ["number", "int", (j) => j.number],
  ["trigger", "text", (j) => j.trigger],
  ["command", "text", (j) => j.command ?? null],
  ["requester", "text", (j) => j.requester],
  ["instruction", "text", (j) => j.instruction ?? ""],
  ["trigger_comment_id", "bigint", (j) => j.triggerCommentId ?? null],
  ["delivery_id", "text", (j) => j.deliveryId ?? null],
  ["context", "jsonb", (j) => JSON.stringify(j.context ?? {})],
  ["branch", "text", (j) => j.branch ?? null],
  ["pr_number", "int", (j) => j.prNumber ?? null],
];
const NEW_JOB_NAMES = NEW_JOB_COLUMNS.map(([name]) => name).join(", ");
const placeholders = (cast: (type: string) => string, after = 0) =>
  NEW_JOB_COLUMNS.map(([, type], i) => `$${i + after + 1}${cast(type)}`).join(", ");

const INSERT_JOB = `INSERT INTO jobs (${NEW_JOB_NAMES}) VALUES (${placeholders(() => "")})
  RETURNING *`;

const INSERT_JOBS = `
  INSERT INTO jobs (id, ${NEW_JOB_NAMES}) OVERRIDING SYSTEM VALUE
  SELECT * FROM unnest($1::bigint[], ${placeholders((type) => `::${type}[]`, 1)})`;

export async function insertJob(db: Queryable, job: NewJob): Promise<Job> {
  const [inserted] = await queryRows(
    db,
    INSERT_JOB,
    NEW_JOB_COLUMNS.map(([, , value]) => value(job)),
    JobRow,
    "a new jobs row",
  );
  if (!inserted) throw new Error("the jobs insert returned no row");
  return inserted;
}

/**
 * Inserts the jobs in one statement, under ids drawn beforehand (drawn with the intake's lookup),
 * so that their queue entries can go out in the same round trip.
 */
export async function insertJobs(db: Queryable, ids: number[], jobs: NewJob[]): Promise<void> {
  if (jobs.length === 0) return;
  await db.query(
    prepared(db, INSERT_JOBS, [ids, ...NEW_JOB_COLUMNS.map(([, , value]) => jobs.map(value))]),
  );
}

export async function getJob(db: Queryable, id: number): Promise<Job | undefined> {
  const [job] = await queryRows(db, "SELECT * FROM jobs WHERE id = $1", [id], JobRow, `job ${id}`);
  return job;
}

/** The job, when it is an issue job; a chat turn is no job of the GitHub pipeline. */
export async function getIssueJob(db: Queryable, id: number): Promise<IssueJob | undefined> {
  const job = await getJob(db, id);
  if (job && !isIssueJob(job)) throw new PermanentError(`job ${id} is not on an issue`);
  return job;
}

const PATCH_COLUMNS: Record<keyof JobPatch, string> = {
  status: "status",
  branch: "branch",
  prNumber: "pr_number",
  progressCommentId: "progress_comment_id",
  error: "error",
  context: "context",
  usage: "usage",
  costUsd: "cost_usd",
  startedAt: "started_at",
  finishedAt: "finished_at",
};
const JSON_FIELDS = new Set<keyof JobPatch>(["context", "usage"]);

/** Sets only the given fields. A final status stamps finished_at unless the patch sets it. */
export async function updateJob(
  db: Queryable,
  id: number,
  patch: JobPatch,
): Promise<Job | undefined> {
  const sets: string[] = [];
  const values: unknown[] = [id];
  for (const [field, value] of Object.entries(patch) as [keyof JobPatch, unknown][]) {
    if (value === undefined) continue;
    values.push(JSON_FIELDS.has(field) ? JSON.stringify(value) : value);
    sets.push(`${PATCH_COLUMNS[field]} = $${values.length}`);
  }
  if (patch.status && FINAL_STATUSES.includes(patch.status) && patch.finishedAt === undefined) {
    sets.push("finished_at = coalesce(finished_at, now())");
  }
  sets.push("updated_at = now()");
  const [job] = await queryRows(
    db,
    `UPDATE jobs SET ${sets.join(", ")} WHERE id = $1 RETURNING *`,
    values,
    JobRow,
    `the updated job ${id}`,
  );
  return job;
}

export interface JobFilter {
  conversationId?: number;
  repositoryId?: number;
  /** true: only chat-face turns; false: none of them. */
  chatTurns?: boolean;
  /** Only turns of this person's chat-face conversations, by GitHub user id. */
  conversationOwnerId?: number;
  statuses?: JobStatus[];
  /** Only jobs the queue is not done with (queued, running, or acknowledged and still going). */
  unfinished?: boolean;
  /** Page backwards: only ids below this. */
  beforeId?: number;
  /** Default 50. */
  limit?: number;
}

/** Newest first. */
export async function listJobs(db: Queryable, filter: JobFilter = {}): Promise<Job[]> {
  const where: string[] = [];
  const values: unknown[] = [];
  const add = (sql: string, value: unknown) => {
    values.push(value);
    where.push(sql.replace("?", `$${values.length}`));
  };
  if (filter.conversationId !== undefined) add("conversation_id = ?", filter.conversationId);
  if (filter.repositoryId !== undefined) add("repository_id = ?", filter.repositoryId);
  if (filter.chatTurns !== undefined) where.push(`trigger ${filter.chatTurns ? "=" : "<>"} 'chat'`);
  if (filter.conversationOwnerId !== undefined) {
    add(
      "conversation_id IN (SELECT id FROM conversations WHERE kind = 'api' AND api_owner_id = ?)",
      filter.conversationOwnerId,
    );
  }
  if (filter.statuses) add("status = ANY(?)", filter.statuses);
  if (filter.beforeId !== undefined) add("id < ?", filter.beforeId);
  if (filter.unfinished) where.push("finished_at IS NULL");
  values.push(filter.limit ?? 50);
  return queryRows(
    db,
    `SELECT * FROM jobs ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
     ORDER BY id DESC LIMIT $${values.length}`,
    values,
    JobRow,
    "listed jobs",
  );
}

/**
 * Whose daily budget: a repository's, shared by its jobs and chat turns, or the scratch
 * conversations of the operator or of a person (by id: a login can change hands).
 */
export type BudgetOwner = { repositoryId: number } | { scratchOwner: ConversationOwner };

/** The jobs that spend the budget, their owner as $1. */
const budgetJobs = (whose: BudgetOwner) =>
  "repositoryId" in whose
    ? "repository_id = $1"
    : `trigger = 'chat' AND repository_id IS NULL
       AND conversation_id IN (SELECT c.id FROM conversations c WHERE c.kind = 'api' AND ${ownedBy(whose.scratchOwner, 1).sql})`;

const ownerParam = (whose: BudgetOwner) =>
  "repositoryId" in whose ? whose.repositoryId : ownedBy(whose.scratchOwner, 1).param;

/** What the advisory lock on a scratch budget is taken on. */
const lockName = (owner: ConversationOwner) =>
  owner.kind === "operator" ? "operator" : `user ${owner.id}`;

/**
 * What jobs created since `since` cost: a repository's, or the chat-face turns an owner ran on
 * scratch workspaces.
 */
export async function spentSince(db: Queryable, whose: BudgetOwner, since: Date): Promise<number> {
  const { rows } = await db.query<{ spent: string }>(
    `SELECT coalesce(sum(cost_usd), 0) AS spent FROM jobs
     WHERE ${budgetJobs(whose)} AND created_at >= $2`,
    [ownerParam(whose), since],
  );
  return Number(rows[0]?.spent ?? 0);
}

export interface BudgetGrant {
  /** What this attempt may spend; 0 when a limit is reached. */
  grantUsd: number;
  dailyLeftUsd: number;
  jobLeftUsd: number;
  /** Left of the requester's monthly budget; only when the job has a capped, known spender. */
  monthlyLeftUsd?: number;
}

/** The class of the advisory locks on scratch budgets (the two-key form, apart from single keys). */
export const SCRATCH_BUDGET_LOCK = 726_301;
/** The class of the advisory locks on a person's monthly budget (spenders.ts). */
export const SPENDER_BUDGET_LOCK = 726_302;

/**
 * What a set of jobs holds of a budget, the job $2 apart: an unfinished job counts with what it
 * was granted, a finished one with what it spent.
 */
const HELD = `coalesce(sum(CASE WHEN finished_at IS NULL
                              THEN greatest(cost_usd, coalesce(reserved_usd, 0))
                              ELSE cost_usd END) FILTER (WHERE id <> $2), 0) AS others,
              coalesce(sum(cost_usd) FILTER (WHERE id = $2), 0) AS own`;

async function held(client: Queryable, sql: string, params: unknown[]) {
  const { rows } = await client.query<{ others: string; own: string }>(sql, params);
  return { others: Number(rows[0]?.others ?? 0), own: Number(rows[0]?.own ?? 0) };
}

/**
 * Reserves what a job's attempt may spend, under a lock on its budget's owner (its repository's
 * row; for scratch, an advisory lock on the person), so that concurrent jobs never promise more
 * than the day's limit between them. With `monthly`, in the same transaction, what the job's
 * spender (spenders.ts) holds since the month began in every repository counts too, under an
 * advisory lock on the spender taken after the other, always in that order, so no two
 * reservations can deadlock.
 */
export function reserveBudget(
  pool: pg.Pool,
  input: BudgetOwner & {
    jobId: number;
    since: Date;
    maxDailyUsd: number;
    maxJobUsd: number;
    /** The requester's monthly cap (maxMonthlyCostUsdPerUser), counted from `since`. */
    monthly?: { since: Date; maxUsd: number };
  },
): Promise<BudgetGrant> {
  return withTransaction(pool, async (client) => {
    if ("repositoryId" in input) {
      await client.query("SELECT 1 FROM repositories WHERE id = $1 FOR UPDATE", [
        input.repositoryId,
      ]);
    } else {
      await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [
        SCRATCH_BUDGET_LOCK,
        lockName(input.scratchOwner),
      ]);
    }
    const { others, own } = await held(
      client,
      `SELECT ${HELD} FROM jobs WHERE ${budgetJobs(input)} AND (created_at >= $3 OR id = $2)`,
      [ownerParam(input), input.jobId, input.since],
    );
    const dailyLeftUsd = input.maxDailyUsd - others - own;
    const jobLeftUsd = input.maxJobUsd - own;
    const spender = input.monthly ? await jobSpender(client, input.jobId) : null;
    let monthlyLeftUsd: number | undefined;
    if (input.monthly && spender !== null) {
      await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [
        SPENDER_BUDGET_LOCK,
        spender,
      ]);
      const month = await held(client, `SELECT ${HELD} FROM (${spenderJobs(spender)}) p`, [
        spender,
        input.jobId,
        input.monthly.since,
      ]);
      monthlyLeftUsd = input.monthly.maxUsd - month.others - month.own;
    }
    const grantUsd = Math.max(0, Math.min(dailyLeftUsd, jobLeftUsd, monthlyLeftUsd ?? Infinity));
    await client.query("UPDATE jobs SET reserved_usd = $2 WHERE id = $1", [
      input.jobId,
      own + grantUsd,
    ]);
    return {
      grantUsd,
      dailyLeftUsd,
      jobLeftUsd,
      ...(monthlyLeftUsd !== undefined && { monthlyLeftUsd }),
    };
  });
}
