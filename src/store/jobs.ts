import type pg from "pg";
import { z } from "zod";
import { PermanentError } from "../errors.ts";
import { type ConversationOwner, ownedBy } from "./api-conversations.ts";
import { jobSpender, Spent, spenderJobs } from "./spenders.ts";
import { prepared, type Queryable, withTransaction } from "./sql.ts";
import { bigint, numeric, queryRows, row } from "./stored-value.ts";

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
 * request moved; a check or commit status failed on the head vmpilot pushed last); chat is a turn of the chat face
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

const JobRow = row({
  id: bigint,
  conversation_id: bigint,
  /** Null only for a chat turn on a scratch workspace. */
  installation_id: bigint.nullable(),
  repository_id: bigint.nullable(),
  /** owner/name when the job was triggered; "scratch" for a chat turn without a repository. */
  repo: z.string(),
  /** The issue or pull request the trigger was on; null for a chat turn. */
  number: z.number().int().nullable(),
  trigger: z.enum(JOB_TRIGGERS),
  /** The command verb (fix, plan, review, ...), null for a plain label or mention. */
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
  /** Set when a notice claimed the job's first comment while it waited (acknowledgeWaiting). */
  noticed_at: z.date().nullable(),
  created_at: z.date(),
  started_at: z.date().nullable(),
  finished_at: z.date().nullable(),
  updated_at: z.date(),
  usage: z.record(z.string(), z.unknown()),
  cost_usd: numeric,
});
export type Job = z.output<typeof JobRow>;

/** A job on a GitHub issue or pull request: every job but a chat turn. */
export type IssueJob = Job & { installationId: number; repositoryId: number; number: number };

export function isIssueJob(job: Job): job is IssueJob {
  return job.installationId !== null && job.repositoryId !== null && job.number !== null;
}

export type NewJob = Pick<
  Job,
  "conversationId" | "installationId" | "repositoryId" | "repo" | "number" | "trigger" | "requester"
> &
  Partial<
    Pick<
      Job,
      | "command"
      | "instruction"
      | "triggerCommentId"
      | "deliveryId"
      | "context"
      | "branch"
      | "prNumber"
    >
  >;

/** The fields updateJob sets, each in the column of its name in snake_case. */
const PATCH_FIELDS = [
  "status",
  "branch",
  "prNumber",
  "progressCommentId",
  "error",
  "context",
  "usage",
  "costUsd",
  "startedAt",
  "finishedAt",
] as const;
export type JobPatch = Partial<Pick<Job, (typeof PATCH_FIELDS)[number]>>;

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

const PATCH_COLUMNS = new Map<string, string>(
  PATCH_FIELDS.map((field) => [
    field,
    field.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`),
  ]),
);
const JSON_FIELDS = new Set<string>(["context", "usage"]);

/** Sets only the given fields. A final status stamps finished_at unless the patch sets it. */
export async function updateJob(
  db: Queryable,
  id: number,
  patch: JobPatch,
): Promise<Job | undefined> {
  const sets: string[] = [];
  const values: unknown[] = [id];
  for (const [field, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    const column = PATCH_COLUMNS.get(field);
    if (column === undefined) throw new Error(`updateJob does not set ${field}`);
    values.push(JSON_FIELDS.has(field) ? JSON.stringify(value) : value);
    sets.push(`${column} = $${values.length}`);
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
  const [sum] = await queryRows(
    db,
    `SELECT coalesce(sum(cost_usd), 0) AS spent FROM jobs
     WHERE ${budgetJobs(whose)} AND created_at >= $2`,
    [ownerParam(whose), since],
    Spent,
    "the jobs' spending",
  );
  return sum?.spent ?? 0;
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

const Held = z.object({ others: numeric, own: numeric });

async function held(client: Queryable, sql: string, params: unknown[]) {
  const [holdings] = await queryRows(client, sql, params, Held, "a budget's holdings");
  return holdings ?? { others: 0, own: 0 };
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
