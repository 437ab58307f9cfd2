// A fix's way out: commit and push the branch, then open or update the conversation's pull request.
import type { ProbotOctokit } from "probot";
import type { RunCost, TestsSummary } from "../../github/progress-comment.ts";
import {
  type ChangedFile,
  type PullRequestRef,
  publishPullRequest,
  renderPullRequestBody,
} from "../../github/pull-request.ts";
import type { CommitIdentity } from "../../workspace/git/commit.ts";
import { publishWorkspace } from "../../workspace/git/publish.ts";
import type { JobWorkspace } from "./workspace.ts";

export interface DeliverInput {
  octokit: ProbotOctokit;
  owner: string;
  repo: string;
  ws: JobWorkspace;
  token: string;
  defaultBranch: string;
  /** Pushing to someone's pull request branch: fast-forward only, and no pull request of ours. */
  served: boolean;
  title: string;
  summary: string;
  tests?: TestsSummary;
  author: CommitIdentity;
  requester: string;
  /** From the webhook; without it the id is looked up. */
  requesterId?: number;
  /** The issue the pull request fixes, when the conversation started on one. */
  fixes?: number;
  /** The pull request the conversation opened before. */
  knownPr: number | null;
  jobUrl: string;
  /** What the run took, for the pull request's body; null when the repository shows no cost. */
  cost: RunCost | null;
  startedAt: number;
  signal: AbortSignal;
}

export interface Delivered {
  pushed: boolean;
  sha: string;
  files: ChangedFile[];
  /** Set when this job opened or updated the conversation's pull request. */
  pullRequest?: PullRequestRef & { created: boolean };
}

/** `Co-authored-by` needs GitHub's noreply address with the user id to credit the requester. */
async function coAuthor(
  octokit: ProbotOctokit,
  login: string,
  id: number | undefined,
): Promise<CommitIdentity> {
  if (id !== undefined) return { name: login, email: `${id}+${login}@users.noreply.github.com` };
  try {
    const { data } = await octokit.rest.users.getByUsername({ username: login });
    return { name: login, email: `${data.id}+${login}@users.noreply.github.com` };
  } catch {
    return { name: login, email: `${login}@users.noreply.github.com` };
  }
}

export async function deliver(input: DeliverInput): Promise<Delivered> {
  const { ws } = input;
  const published = await publishWorkspace({
    workspace: ws.workspace,
    mirror: ws.checkout.mirror,
    url: ws.checkout.url,
    auth: { token: input.token },
    baseSha: ws.from,
    branch: ws.checkout.branch,
    defaultBranch: input.defaultBranch,
    ...(input.served && { servedBranch: ws.checkout.branch }),
    commit: {
      message: input.title,
      author: input.author,
      // The app's own run (an automation) has no one else to credit.
      coAuthors:
        input.requester === input.author.name
          ? []
          : [await coAuthor(input.octokit, input.requester, input.requesterId)],
    },
    // Our own branch may be rewritten, but only from what it was when the job began.
    lease: input.served ? undefined : ws.remoteSha,
    signal: input.signal,
  });
  if (!published.pushed || input.served) return published;
  const body = renderPullRequestBody({
    summary: input.summary,
    tests: input.tests,
    files: published.files,
    cost: input.cost,
    durationMs: Date.now() - input.startedAt,
    fixes: input.fixes,
    requester: input.requester,
    jobUrl: input.jobUrl,
  });
  const pullRequest = await publishPullRequest(input.octokit, {
    owner: input.owner,
    repo: input.repo,
    head: ws.checkout.branch,
    base: input.defaultBranch,
    title: input.title,
    body,
    knownNumber: input.knownPr,
  });
  return { ...published, pullRequest };
}
