// Whether a job started by a push to a pull request's base has a conflict to resolve. GitHub
// works mergeability out in the background after the push, so the pull request is asked again
// until it knows, a bounded number of times. A pull request that still merges ends the job here,
// silently: no comment, no workspace, no model; one a person pushed to after vmpilot, with a note.
import { setTimeout as delay } from "node:timers/promises";
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import { postComment } from "../../../github/comments.ts";
import { pushedAfterVmpilot, pushState } from "../../../store/ci-loop.ts";
import type { JobContext } from "../../../store/job-context.ts";
import type { IssueJob } from "../../../store/jobs.ts";
import { markPullRequestClosed } from "../../../store/pull-request-conversations.ts";
import type { MergeablePoll, OpenDeps } from "../../run/deps.ts";
import type { Unwanted } from "../../run/kind.ts";

const DEFAULT_POLL: MergeablePoll = { attempts: 6, delayMs: 5000 };

const pullSchema = z.object({
  state: z.string(),
  /** null while GitHub has not computed it. */
  mergeable: z.boolean().nullable(),
  mergeable_state: z.string(),
  head: z.object({
    ref: z.string(),
    sha: z.string(),
    repo: z.object({ full_name: z.string() }).nullable(),
  }),
  base: z.object({ ref: z.string() }),
});
type Pull = z.infer<typeof pullSchema>;

/** The pull request once GitHub knows whether it merges, or as it last was after the bound. */
async function pollMergeable(
  octokit: ProbotOctokit,
  pr: { owner: string; repo: string; number: number },
  poll: MergeablePoll,
  signal: AbortSignal,
): Promise<Pull> {
  for (let attempt = 1; ; attempt++) {
    const { data } = await octokit.rest.pulls.get({
      owner: pr.owner,
      repo: pr.repo,
      pull_number: pr.number,
    });
    const pull = pullSchema.parse(data);
    if (pull.mergeable !== null || pull.state !== "open" || attempt >= poll.attempts) return pull;
    await delay(poll.delayMs, undefined, { signal });
  }
}

/** Why the pull request needs no merge from vmpilot, or undefined when it conflicts. */
function noMergeNeeded(pull: Pull, repo: string, branch: string | null, base: string) {
  if (pull.state !== "open") return "closed";
  if (pull.head.repo?.full_name !== repo || pull.head.ref !== branch) return "not vmpilot's branch";
  if (pull.base.ref !== base) return `based on ${pull.base.ref}, not ${base}`;
  if (pull.mergeable === null) return "GitHub did not say whether it merges";
  if (pull.mergeable || pull.mergeable_state !== "dirty") return "merges cleanly";
  return undefined;
}

/**
 * For a base_push job: nothing when its pull request conflicts with the base and its head is the
 * commit vmpilot pushed last. A conflict on a head a person pushed after vmpilot is theirs to
 * merge: the job is refused with a note on the pull request. Otherwise it is ignored.
 */
export async function mergeUnwanted(
  deps: Pick<OpenDeps, "db" | "mergeablePoll">,
  octokit: ProbotOctokit,
  job: IssueJob,
  context: JobContext,
  signal: AbortSignal,
): Promise<Unwanted | undefined> {
  const pr = { owner: context.owner, repo: context.name, number: job.number };
  const pull = await pollMergeable(octokit, pr, deps.mergeablePoll ?? DEFAULT_POLL, signal);
  const why = noMergeNeeded(pull, job.repo, job.branch, context.defaultBranch);
  if (why === "closed") await markPullRequestClosed(deps.db.pool, job.conversationId);
  if (why) return { ignored: `no merge of the base needed: ${why}` };
  const pushed = await pushState(deps.db.pool, job.conversationId);
  const after = pushedAfterVmpilot(pull.head.sha, pushed.sha);
  if (!after) return undefined;
  const base = context.defaultBranch;
  await postComment(
    octokit,
    pr,
    `⏸ \`${base}\` moved and this pull request no longer merges with it, but vmpilot did not merge it: ${after}, and does not build on their commits. Merge \`${base}\` into the branch yourself.`,
  );
  return { refused: after };
}
