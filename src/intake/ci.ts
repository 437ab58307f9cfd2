// Checks on vmpilot's own pull requests. An app with the checks permission hears of every app's
// runs, GitHub Actions' too, and GitHub sends check_run, check_suite and workflow_run for one
// Actions run: almost all of them are dropped here from the payload alone. What is left, a failure
// on the head vmpilot pushed last, becomes one fix job per head (deduplicated durably by the
// delivery's trigger key); a check suite that passed there becomes a ready-for-review check.
// Commit statuses (ci-status.ts) end the same way. No GitHub call here, as everywhere in the
// intake.
import { z } from "zod";
import { BRANCH_PREFIX } from "../github/branch-name.ts";
import type { Queue } from "../jobs/queue/queue.ts";
import { findPushedConversation } from "../store/ci-loop.ts";
import { conversationKey } from "../store/conversations.ts";
import type { Database } from "../store/database.ts";
import { recordDelivery } from "../store/deliveries.ts";
import { type JobContext, readJobContext } from "../store/job-context.ts";
import { insertJob } from "../store/jobs.ts";
import { withTransaction } from "../store/sql.ts";
import { parsePayload } from "./deliveries.ts";

// Probot checks the signature, not the shape: only the fields read here are parsed, as for the
// trigger deliveries (deliveries.ts).
const id = z.number().int();
const Repository = z.object({
  id,
  full_name: z.string(),
  html_url: z.string(),
  clone_url: z.string(),
  default_branch: z.string(),
});
type Repository = z.infer<typeof Repository>;
const PullRef = z.object({
  number: id,
  head: z.object({ repo: z.object({ id }) }),
  base: z.object({ repo: z.object({ id }) }),
});
type PullRef = z.infer<typeof PullRef>;
const Run = z.object({
  status: z.string().nullable(),
  conclusion: z.string().nullable(),
  head_sha: z.string(),
  pull_requests: z.array(PullRef.nullable()),
});
export const common = { repository: Repository, installation: z.object({ id }).optional() };
const CheckRunPayload = z.object({
  ...common,
  check_run: Run.extend({ check_suite: z.object({ head_branch: z.string().nullish() }) }),
});
const CheckSuitePayload = z.object({
  ...common,
  check_suite: Run.extend({ id, head_branch: z.string().nullable() }),
});
const WorkflowRunPayload = z.object({
  ...common,
  workflow_run: Run.extend({ head_branch: z.string().nullable() }),
});

/** One completed run, whichever of the three events told of it. */
export interface CiRun {
  event: "check_run" | "check_suite" | "workflow_run";
  installationId: number | undefined;
  repository: Repository;
  status: string | null;
  conclusion: string | null;
  headSha: string;
  headBranch: string | null;
  /** Pull requests of this repository from a branch of this repository (a fork's are absent). */
  prNumbers: number[];
  /** The check suite, for a check_suite event. */
  suiteId?: number;
}

export interface CiIntakeDeps {
  db: Database;
  queue: Pick<Queue, "enqueueJobs" | "enqueueReady" | "wake">;
}

const FAILED: ReadonlySet<string> = new Set(["failure", "timed_out"]);
const PASSED: ReadonlySet<string> = new Set(["success", "neutral", "skipped"]);

function ownPullRequests(repository: Repository, pulls: ReadonlyArray<PullRef | null>): number[] {
  return pulls.flatMap((pr) =>
    pr && pr.head.repo.id === repository.id && pr.base.repo.id === repository.id ? [pr.number] : [],
  );
}

export function fromCheckRun(raw: unknown): CiRun {
  const payload = parsePayload(CheckRunPayload, raw, "check_run");
  const run = payload.check_run;
  return {
    event: "check_run",
    installationId: payload.installation?.id,
    repository: payload.repository,
    status: run.status,
    conclusion: run.conclusion,
    headSha: run.head_sha,
    headBranch: run.check_suite.head_branch ?? null,
    prNumbers: ownPullRequests(payload.repository, run.pull_requests),
  };
}

export function fromCheckSuite(raw: unknown): CiRun {
  const payload = parsePayload(CheckSuitePayload, raw, "check_suite");
  const suite = payload.check_suite;
  return {
    event: "check_suite",
    installationId: payload.installation?.id,
    repository: payload.repository,
    status: suite.status,
    conclusion: suite.conclusion,
    headSha: suite.head_sha,
    headBranch: suite.head_branch,
    prNumbers: ownPullRequests(payload.repository, suite.pull_requests),
    suiteId: suite.id,
  };
}

export function fromWorkflowRun(raw: unknown): CiRun {
  const payload = parsePayload(WorkflowRunPayload, raw, "workflow_run");
  const run = payload.workflow_run;
  return {
    event: "workflow_run",
    installationId: payload.installation?.id,
    repository: payload.repository,
    status: run.status,
    conclusion: run.conclusion,
    headSha: run.head_sha,
    headBranch: run.head_branch,
    prNumbers: ownPullRequests(payload.repository, run.pull_requests),
  };
}

export type CiIntakeResult = { jobId: number } | { ready: true } | { ignored: string };

/** Why a run is none of vmpilot's business, from the payload alone; undefined when it may be. */
function dropped(run: CiRun): string | undefined {
  if (run.status !== "completed") return `status ${run.status}`;
  if (!run.headBranch?.startsWith(BRANCH_PREFIX)) return "not a vmpilot branch";
  if (run.prNumbers.length === 0) return "no pull request of this repository";
  const failed = FAILED.has(run.conclusion ?? "");
  const passedSuite = run.event === "check_suite" && PASSED.has(run.conclusion ?? "");
  return failed || passedSuite ? undefined : `conclusion ${run.conclusion}`;
}

export async function recordCiRun(
  deps: CiIntakeDeps,
  deliveryId: string,
  run: CiRun,
): Promise<CiIntakeResult> {
  const why = dropped(run);
  if (why) return { ignored: why };
  if (!run.installationId) return { ignored: "not a GitHub App delivery" };
  return recordCiOutcome(deps, deliveryId, {
    event: run.event,
    action: "completed",
    installationId: run.installationId,
    repository: run.repository,
    sha: run.headSha,
    branches: [run.headBranch ?? ""],
    prNumbers: run.prNumbers,
    failed: FAILED.has(run.conclusion ?? ""),
    readyKey: `ready:${run.suiteId}`,
  });
}

/** What a CI event, of a check or of a commit status, says of one head it may be vmpilot's. */
export interface CiOutcome {
  event: string;
  action: string | null;
  installationId: number;
  repository: Repository;
  sha: string;
  /** vmpilot branches the head may be on. */
  branches: string[];
  /** The pull requests the payload names; null when it names none (a commit status). */
  prNumbers: number[] | null;
  /** Failed, or else passed. */
  failed: boolean;
  /** A pass's own trigger key: one ready check for each. */
  readyKey: string;
}

/**
 * A failure on the head vmpilot pushed last becomes its one fix job, a pass there a ready check;
 * recorded with the delivery, in one transaction.
 */
export async function recordCiOutcome(
  deps: CiIntakeDeps,
  deliveryId: string,
  outcome: CiOutcome,
): Promise<CiIntakeResult> {
  const { repository, installationId, failed } = outcome;
  const result = await withTransaction(deps.db.pool, async (client): Promise<CiIntakeResult> => {
    // Only the head vmpilot pushed last, on its own branch: a head a person pushed after it is
    // theirs.
    const conversation = await findPushedConversation(client, {
      repositoryId: repository.id,
      prNumbers: outcome.prNumbers,
      branches: outcome.branches,
      sha: outcome.sha,
    });
    if (!conversation) return { ignored: "not the head vmpilot pushed last" };
    const fresh = await recordDelivery(client, {
      id: deliveryId,
      event: outcome.event,
      action: outcome.action,
      installationId,
      repositoryId: repository.id,
      // One fix per failed head whichever event tells of it first; one check per pass.
      triggerKey: failed ? `ci:${repository.id}:${outcome.sha}` : outcome.readyKey,
    });
    if (!fresh) return { ignored: "already handled" };
    if (!failed) {
      await deps.queue.enqueueReady(
        { conversationId: conversation.conversation_id, sha: outcome.sha, grace: false },
        { db: client },
      );
      return { ready: true };
    }
    const { unknownVerb: _, ...asked } = readJobContext({
      id: conversation.job_id,
      context: conversation.context,
    });
    const context: JobContext = {
      ...asked,
      itemKind: "pull_request",
      htmlUrl: `${repository.html_url}/pull/${conversation.pr_number}`,
      cloneUrl: repository.clone_url,
      defaultBranch: repository.default_branch,
      target: { type: "issue" },
      headSha: outcome.sha,
    };
    const job = await insertJob(client, {
      conversationId: conversation.conversation_id,
      installationId,
      repositoryId: repository.id,
      repo: repository.full_name,
      number: conversation.pr_number,
      trigger: "ci",
      command: "fix",
      // Whoever asked for the work CI failed on: the fix is theirs, and so is the review.
      requester: conversation.requester,
      deliveryId,
      context,
      prNumber: conversation.pr_number,
    });
    await deps.queue.enqueueJobs(client, [
      { jobId: job.id, conversationKey: conversationKey(conversation.conversation_id) },
    ]);
    return { jobId: job.id };
  });
  if (!("ignored" in result)) deps.queue.wake();
  return result;
}
