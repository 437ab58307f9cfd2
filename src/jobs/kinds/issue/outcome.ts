// What a finished agent run leaves behind, per mode: a plan in the comment, a posted review, or a
// pushed branch with its pull request (and replies in the review threads it addressed).
import type { RepoSettings } from "../../../config/repo-config.ts";
import type { IssueContext } from "../../../github/issue-context.ts";
import { renderFinal } from "../../../github/progress-comment.ts";
import {
  parseThreadReplies,
  type ReviewThread,
  replyToThreads,
} from "../../../github/review-threads.ts";
import { type Conversation, linkConversationToPr } from "../../../store/conversations.ts";
import type { CommitIdentity } from "../../../workspace/git/commit.ts";
import type { JobRun } from "../../run/agent.ts";
import { deliver } from "../../run/deliver.ts";
import { deliveredComment, finalView } from "../../run/final.ts";
import type { Working } from "../../run/kind.ts";
import type { JobWorkspace } from "../../run/workspace.ts";
import type { IssueAttempt } from "./attempt.ts";
import { finishMerge, type MergeStart } from "./merge.ts";
import type { WorkRequest } from "./request.ts";
import { postReview } from "./review.ts";
import type { Target } from "./target.ts";

type Found = Extract<Target, { ok: true }>;

export function planBody(attempt: IssueAttempt, result: JobRun, settings: RepoSettings): string {
  const view = finalView(attempt.job, attempt.progress, result, settings);
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
    ...finalView(attempt.job, attempt.progress, result, settings),
    headline: `Posted a review with ${posted.inline} inline comment${s}`,
    pullRequest: { number: prNumber, url: posted.url },
    finishedAt: Date.now(),
  });
}

export interface FixInput {
  /** The runner's deps, run, place and settings, for the delivery. */
  work: Pick<Working, "deps" | "run" | "place" | "granted">;
  attempt: IssueAttempt;
  conversation: Conversation;
  request: WorkRequest;
  target: Found;
  ws: JobWorkspace;
  result: JobRun;
  threads: readonly ReviewThread[];
  /** Shown under the outcome (a CI fix: what failed). */
  notes?: readonly string[];
  /** After a push to vmpilot's own branch, once its pull request is known. */
  onPushed?: (sha: string) => Promise<void>;
}

/** Pushes the work, opens or updates the pull request, answers the threads; the final comment. */
export async function fixBody(input: FixInput): Promise<string> {
  const { attempt, result, target, conversation } = input;
  const { context, job } = attempt;
  const delivered = await deliver(input.work, job, attempt.progress, {
    ws: input.ws,
    result,
    defaultBranch: context.defaultBranch,
    served: target.served,
    title: input.request.request || context.title,
    appSlug: context.appSlug,
    requesterId: context.requesterId,
    fixes: conversation.kind === "issue" ? conversation.number : undefined,
    knownPr: conversation.prNumber ?? job.prNumber,
  });
  const pr = delivered.pullRequest;
  if (pr) {
    await linkConversationToPr(input.work.deps.db.pool, conversation.id, pr.number, target.branch);
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
  const { settings } = input.work.granted;
  const options = { notes: input.notes, served };
  return deliveredComment(job, attempt.progress, result, settings, delivered, options).body;
}

/** Commits and pushes the merge of the base; the final comment says what was merged and how. */
export async function mergeBody(input: {
  attempt: IssueAttempt;
  ws: JobWorkspace;
  merge: MergeStart;
  token: () => Promise<string>;
  result: JobRun;
  settings: RepoSettings;
  author: CommitIdentity;
  signal: AbortSignal;
  onPushed?: (sha: string) => Promise<void>;
}): Promise<{ ok: boolean; body: string }> {
  const { attempt, merge, result } = input;
  const view = finalView(attempt.job, attempt.progress, result, input.settings);
  attempt.progress.step("pushed");
  const end = await finishMerge({
    ws: input.ws,
    merge,
    defaultBranch: attempt.context.defaultBranch,
    token: await input.token(),
    author: input.author,
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
