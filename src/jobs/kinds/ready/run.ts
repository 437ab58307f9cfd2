// vmpilot opens its pull requests as drafts. Once the checks on the head it pushed last all passed,
// and its commit statuses too (or, in a repository without CI, once the job's tests passed and
// neither a check nor a status showed up within the grace time), the pull request is marked ready
// for review and whoever asked for the work is asked to review it. Only GraphQL can mark a pull
// request ready; REST cannot.
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import type { RepoSettings } from "../../../config/repo-config.ts";
import { type Item, postComment } from "../../../github/comments.ts";
import { combinedStatus } from "../../../github/commit-status.ts";
import { githubStatus } from "../../../github/request-status.ts";
import { loginOf } from "../../../github/users.ts";
import { claimReady, pushedAfterVmpilot, pushState, releaseReady } from "../../../store/ci-loop.ts";
import { getConversation } from "../../../store/conversations.ts";
import { getRepository } from "../../../store/installations.ts";
import { readJobContext } from "../../../store/job-context.ts";
import { getIssueJob } from "../../../store/jobs.ts";
import type { ReadyCheck } from "../../queue/queue.ts";
import type { OpenDeps } from "../../run/deps.ts";
import { knownSettings as settingsAsKnown } from "../../run/settings.ts";

type ReadyDeps = Pick<OpenDeps, "db" | "auth" | "defaults" | "logger">;

const PullRequest = z.object({
  node_id: z.string(),
  state: z.string(),
  draft: z.boolean().optional(),
  head: z.object({ sha: z.string() }),
});

const CheckSuites = z.array(
  z.object({
    status: z.string().nullable(),
    conclusion: z.string().nullable(),
    latest_check_runs_count: z.number().int(),
  }),
);

const MarkedReady = z.object({
  markPullRequestReadyForReview: z.object({ pullRequest: z.object({ isDraft: z.boolean() }) }),
});

const MARK_READY = `mutation($id: ID!) {
  markPullRequestReadyForReview(input: { pullRequestId: $id }) { pullRequest { isDraft } }
}`;

const PASSED: ReadonlySet<string> = new Set(["success", "neutral", "skipped"]);

export async function runReadyCheck(
  deps: ReadyDeps,
  check: ReadyCheck,
  signal: AbortSignal,
): Promise<void> {
  const { db } = deps;
  const log = (why: string) => deps.logger.info({ ...check, why }, "not marked ready");
  const pushed = await pushState(db.pool, check.conversationId);
  // A later push has a check of its own.
  if (pushed.sha !== check.sha || pushed.jobId === null) return log("vmpilot pushed again since");
  const conversation = await getConversation(db.pool, check.conversationId);
  const job = await getIssueJob(db.pool, pushed.jobId);
  if (!conversation?.prNumber || !job) return log("no pull request");
  const settings = await knownSettings(deps, job.repositoryId);
  if (!settings.readyForReview) return log("readyForReview is off");
  const context = readJobContext(job);
  const item: Item = { owner: context.owner, repo: context.name, number: conversation.prNumber };
  const octokit = await deps.auth(job.installationId);
  const { data } = await octokit.rest.pulls.get({
    owner: item.owner,
    repo: item.repo,
    pull_number: item.number,
  });
  const pr = PullRequest.parse(data);
  if (pr.state !== "open" || !pr.draft) return log("not an open draft");
  const after = pushedAfterVmpilot(pr.head.sha, check.sha);
  if (after) return log(after);
  const suites = CheckSuites.parse(
    await octokit.paginate("GET /repos/{owner}/{repo}/commits/{ref}/check-suites", {
      owner: item.owner,
      repo: item.repo,
      ref: check.sha,
      per_page: 100,
    }),
  );
  // GitHub makes a suite for every app with the checks permission, vmpilot's own too; one that
  // never ran a check stays queued for good and says nothing.
  const ran = suites.filter((suite) => suite.latest_check_runs_count > 0);
  if (ran.some((suite) => suite.status !== "completed")) return log("checks still running");
  if (ran.some((suite) => !PASSED.has(suite.conclusion ?? ""))) return log("checks failed");
  // One status is enough to say whether there are any: the state covers them all. Unreadable
  // without the statuses permission: then, as before vmpilot asked for it, only checks count.
  const combined = await combinedStatus(
    octokit,
    { owner: item.owner, repo: item.repo, sha: check.sha },
    1,
  );
  if (!combined) deps.logger.warn(check, "cannot read commit statuses: no statuses permission");
  const statuses = combined && combined.total_count > 0 ? combined.state : undefined;
  if (statuses === "pending") return log("commit statuses still pending");
  if (statuses && statuses !== "success") return log(`commit statuses ${statuses}`);
  if (ran.length === 0 && !statuses && !check.grace) return log("no check ran");
  signal.throwIfAborted();
  if (!(await claimReady(db.pool, conversation.id, check.sha))) return log("already marked ready");
  try {
    MarkedReady.parse(await octokit.graphql(MARK_READY, { id: pr.node_id }));
  } catch (error) {
    await releaseReady(db.pool, conversation.id, check.sha);
    throw error;
  }
  const why =
    ran.length > 0 || statuses
      ? `The checks passed on ${check.sha.slice(0, 10)}`
      : `The tests passed on ${check.sha.slice(0, 10)} and no checks ran on it`;
  const review = await requestReview(deps, octokit, item, context.requesterId);
  await postComment(octokit, item, `✅ ${why}: this pull request is ready for review. ${review}`);
  deps.logger.info({ ...check, prNumber: item.number }, "marked ready for review");
}

/**
 * Asks the requester, by user id, for a review; what the note says of it. GitHub takes reviewers
 * by login: the id's login now, so a renamed account is still asked, and whoever took its old
 * login is not. The app's own runs have no requester id: nobody to ask.
 */
async function requestReview(
  deps: ReadyDeps,
  octokit: ProbotOctokit,
  item: Item,
  requesterId: number | undefined,
): Promise<string> {
  if (requesterId === undefined) return "No one asked for this work, so no review was requested.";
  const login = await loginOf(octokit, requesterId);
  if (login === null) return "The requester's GitHub account is gone, so no review was requested.";
  try {
    await octokit.rest.pulls.requestReviewers({
      owner: item.owner,
      repo: item.repo,
      pull_number: item.number,
      reviewers: [login],
    });
    return `@${login}, please review it.`;
  } catch (error) {
    const status = githubStatus(error);
    // 422: GitHub takes reviews only from collaborators, and never from the author.
    if (status !== 422) deps.logger.warn({ err: error, status }, "review request failed");
    return status === 422
      ? `@${login} cannot review pull requests in this repository, so no review was requested.`
      : `Asking @${login} for a review failed (GitHub answered ${status ?? "nothing"}).`;
  }
}

/**
 * The repository's settings as last read: the job that pushed read the file just before, and
 * this check needs no fresher copy of `readyForReview` than that.
 */
async function knownSettings(deps: ReadyDeps, repositoryId: number): Promise<RepoSettings> {
  const repository = await getRepository(deps.db.pool, repositoryId);
  return settingsAsKnown(repository, deps.defaults);
}
