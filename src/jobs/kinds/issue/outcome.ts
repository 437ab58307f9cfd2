// What a finished agent run leaves behind, per mode: a plan in the comment, a posted review, or a
// pushed branch with its pull request (and replies in the review threads it addressed).
import { runTitle } from "../../../agent/summary.ts";
import type { RepoSettings } from "../../../config/repo-config.ts";
import type { IssueContext } from "../../../github/issue-context.ts";
import { type FinalView, renderFinal } from "../../../github/progress-comment.ts";
import {
  parseThreadReplies,
  type ReviewThread,
  replyToThreads,
} from "../../../github/review-threads.ts";
import { type Conversation, linkConversationToPr } from "../../../store/conversations.ts";
import { updateJob } from "../../../store/jobs.ts";
import type { Queryable } from "../../../store/sql.ts";
import type { CommitIdentity } from "../../../workspace/git/commit.ts";
import { type JobRun, runCost, testsOf } from "../../run/agent.ts";
import { type Delivered, deliver } from "../../run/deliver.ts";
import type { JobWorkspace } from "../../run/workspace.ts";
import type { IssueAttempt } from "./attempt.ts";
import { finishMerge, type MergeStart } from "./merge.ts";
import type { WorkRequest } from "./request.ts";
import { postReview } from "./review.ts";
import type { Target } from "./target.ts";

type Found = Extract<Target, { ok: true }>;

export function baseView(attempt: IssueAttempt, result: JobRun, settings: RepoSettings) {
  return {
    jobId: attempt.job.id,
    jobUrl: attempt.url,
    startedAt: attempt.startedAt,
    // The job's so far: a kept run's counted once, as the attempt that delivers it spends nothing.
    cost: runCost(settings, result, attempt.progress.view.costUsd),
    tests: testsOf(result),
    notes: result.detail ? [result.detail] : [],
    ok: result.reason === "end_turn",
  };
}

export function planBody(attempt: IssueAttempt, result: JobRun, settings: RepoSettings): string {
  const view = baseView(attempt, result, settings);
  const { command, appSlug } = attempt.context;
  return renderFinal({
    ...view,
    headline: "Plan ready",
    summary: result.finalText,
    notes: [
      ...view.notes,
      `To carry it out, comment \`/${command} fix\` or mention @${appSlug} approve.`,
    ],
    finishedAt: Date.now(),
  });
}

export async function reviewBody(
  attempt: IssueAttempt,
  result: JobRun,
  prNumber: number,
  issue: IssueContext,
  settings: RepoSettings,
): Promise<string> {
  const posted = await postReview(attempt.octokit, {
    ...attempt.item,
    number: prNumber,
    headSha: issue.pullRequest?.headSha,
    text: result.finalText,
  });
  const s = posted.inline === 1 ? "" : "s";
  return renderFinal({
    ...baseView(attempt, result, settings),
    headline: `Posted a review with ${posted.inline} inline comment${s}`,
    pullRequest: { number: prNumber, url: posted.url },
    finishedAt: Date.now(),
  });
}

export interface FixInput {
  attempt: IssueAttempt;
  db: Queryable;
  conversation: Conversation;
  request: WorkRequest;
  target: Found;
  ws: JobWorkspace;
  /** A fresh installation token: the run may have outlived the one the checkout used. */
  token: () => Promise<string>;
  result: JobRun;
  settings: RepoSettings;
  threads: readonly ReviewThread[];
  author?: CommitIdentity;
  signal: AbortSignal;
  /** Shown under the outcome (a CI fix: what failed). */
  notes?: readonly string[];
  /** After a push to vmpilot's own branch, once its pull request is known. */
  onPushed?: (sha: string) => Promise<void>;
}

/** Pushes the work, opens or updates the pull request, answers the threads; the final comment. */
export async function fixBody(input: FixInput): Promise<string> {
  const { attempt, result, target, conversation } = input;
  const { context, job } = attempt;
  const base = baseView(attempt, result, input.settings);
  const view = { ...base, notes: [...(input.notes ?? []), ...base.notes] };
  attempt.progress.step("pushed");
  const delivered = await deliver({
    octokit: attempt.octokit,
    owner: context.owner,
    repo: context.name,
    ws: input.ws,
    token: await input.token(),
    defaultBranch: context.defaultBranch,
    served: target.served,
    title: runTitle(result.finalText, input.request.request || context.title),
    summary: result.finalText,
    tests: view.tests,
    author: botAuthor(attempt, input.author),
    requester: job.requester,
    requesterId: context.requesterId,
    fixes: conversation.kind === "issue" ? conversation.number : undefined,
    knownPr: conversation.prNumber ?? job.prNumber,
    jobUrl: attempt.url,
    cost: view.cost,
    startedAt: attempt.startedAt,
    signal: input.signal,
  });
  const pr = delivered.pullRequest;
  if (pr) {
    attempt.progress.step("pull_request");
    await linkConversationToPr(input.db, conversation.id, pr.number, target.branch);
    await updateJob(input.db, job.id, { prNumber: pr.number });
  }
  if (delivered.pushed && !target.served) await input.onPushed?.(delivered.sha);
  if (input.request.mode === "threads" && target.prNumber !== null) {
    const fallback = delivered.pushed
      ? `Addressed in ${delivered.sha.slice(0, 10)}; see the [job log](${attempt.url}).`
      : `No code change for this one; see the [job log](${attempt.url}).`;
    await replyToThreads(
      attempt.octokit,
      { ...attempt.item, number: target.prNumber },
      input.threads,
      parseThreadReplies(result.finalText),
      fallback,
    );
  }
  const served = target.served ? { number: job.number, url: context.htmlUrl } : undefined;
  return renderFinal({
    ...view,
    ...headline(delivered, view.ok, served),
    summary: result.finalText,
    finishedAt: Date.now(),
  });
}

function botAuthor(attempt: IssueAttempt, author?: CommitIdentity): CommitIdentity {
  const slug = attempt.context.appSlug;
  return author ?? { name: `${slug}[bot]`, email: `${slug}[bot]@users.noreply.github.com` };
}

/** Commits and pushes the merge of the base; the final comment says what was merged and how. */
export async function mergeBody(input: {
  attempt: IssueAttempt;
  ws: JobWorkspace;
  merge: MergeStart;
  token: () => Promise<string>;
  result: JobRun;
  settings: RepoSettings;
  author?: CommitIdentity;
  signal: AbortSignal;
  onPushed?: (sha: string) => Promise<void>;
}): Promise<{ ok: boolean; body: string }> {
  const { attempt, merge, result } = input;
  const view = baseView(attempt, result, input.settings);
  attempt.progress.step("pushed");
  const end = await finishMerge({
    ws: input.ws,
    merge,
    defaultBranch: attempt.context.defaultBranch,
    token: await input.token(),
    author: botAuthor(attempt, input.author),
    signal: input.signal,
  });
  const base = `\`${merge.base}\``;
  const how =
    merge.conflicts.length === 0
      ? "git merged it without conflicts"
      : `conflicts resolved in ${merge.conflicts.map((file) => `\`${file}\``).join(", ")}`;
  const pushed = "pushed" in end;
  if (pushed) await input.onPushed?.(end.sha);
  return {
    ok: pushed,
    body: renderFinal({
      ...view,
      ok: view.ok && pushed,
      headline: pushed
        ? `Merged ${base} into this pull request (${end.sha.slice(0, 10)}): ${how}`
        : `Did not push the merge of ${base}: ${end.refused}`,
      pullRequest: { number: attempt.job.number, url: attempt.context.htmlUrl },
      summary: result.finalText,
      finishedAt: Date.now(),
    }),
  };
}

function headline(
  delivered: Delivered,
  ok: boolean,
  served: { number: number; url: string } | undefined,
): Pick<FinalView, "ok" | "headline" | "pullRequest" | "changed"> {
  if (!delivered.pushed) {
    // A run that ended on its own with nothing to push answered what it was asked.
    const headline = ok
      ? "Answered, without changing the code"
      : "Done: no changes to the code, so no pull request";
    return { ok, headline, changed: false };
  }
  const pr = delivered.pullRequest;
  if (pr) {
    const verb = pr.created ? "Opened draft pull request" : "Updated pull request";
    return {
      ok,
      headline: `${verb} #${pr.number}`,
      pullRequest: { number: pr.number, url: pr.url },
    };
  }
  return {
    ok,
    headline: `Pushed ${delivered.sha.slice(0, 10)} to this pull request`,
    pullRequest: served,
  };
}
