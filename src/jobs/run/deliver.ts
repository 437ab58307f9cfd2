// A fix's way out, whatever kind of job made it (an issue job, a scheduled run, a chat turn asked
// for a pull request): commit and push the branch to the job's repository, then open or update the
// conversation's pull request, recorded on the job.
import type { ProbotOctokit } from "probot";
import { runTitle } from "../../agent/summary.ts";
import {
  type ChangedFile,
  type PullRequestRef,
  publishPullRequest,
  renderPullRequestBody,
} from "../../github/pull-request.ts";
import { type Job, updateJob } from "../../store/jobs.ts";
import { type CommitIdentity, VMPILOT_AUTHOR } from "../../workspace/git/commit.ts";
import { publishWorkspace } from "../../workspace/git/publish.ts";
import { type JobRun, runCost, testsOf } from "./agent.ts";
import type { JobDeps } from "./deps.ts";
import type { Working } from "./kind.ts";
import { type JobProgress, jobUrl } from "./progress.ts";
import type { JobWorkspace } from "./workspace.ts";

export interface DeliverInput {
  ws: JobWorkspace;
  /** The run whose work goes out; none when a chat turn asked for the pull request alone. */
  result: JobRun | undefined;
  defaultBranch: string;
  /** The title when the run's final text gives none. */
  title: string;
  /** The pull request's text; default the run's final text, else the title. */
  summary?: string;
  /** Pushing to someone's pull request branch: fast-forward only, and no pull request of ours. */
  served?: boolean;
  /** The app whose bot commits, unless the worker names an author; default vmpilot's own. */
  appSlug?: string;
  /** From the webhook; default the starter's, else it is looked up. */
  requesterId?: number;
  /** The issue the pull request fixes, when the conversation started on one. */
  fixes?: number;
  /** The pull request the conversation opened before; default the job's. */
  knownPr?: number | null;
  /**
   * The pull request was asked for itself (a chat's `/vmpilot pr`): it is opened for the branch as
   * pushed before, even when this run pushes nothing new.
   */
  asked?: boolean;
}

export interface Delivered {
  pushed: boolean;
  sha: string;
  files: ChangedFile[];
  /** Set when this job opened or updated the conversation's pull request. */
  pullRequest?: PullRequestRef & { created: boolean };
}

/** Who commits for vmpilot: the worker's author, else the app's bot, else vmpilot itself. */
export function commitAuthor(
  deps: Pick<JobDeps, "commitAuthor">,
  appSlug?: string,
): CommitIdentity {
  if (deps.commitAuthor) return deps.commitAuthor;
  if (appSlug === undefined) return VMPILOT_AUTHOR;
  return { name: `${appSlug}[bot]`, email: `${appSlug}[bot]@users.noreply.github.com` };
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

export async function deliver(
  { deps, run, place, granted }: Pick<Working, "deps" | "run" | "place" | "granted">,
  job: Pick<Job, "id" | "requester" | "prNumber">,
  progress: Pick<JobProgress, "step" | "view">,
  input: DeliverInput,
): Promise<Delivered> {
  const { ws, result } = input;
  const { repository, starter } = place;
  if (!repository) throw new Error(`job ${job.id} has no repository to deliver to`);
  // The operator's key is no one's login: a mention or a credit would name whoever holds "operator".
  const requester = "operator" in starter ? null : job.requester;
  const requesterId = input.requesterId ?? ("person" in starter ? starter.person.id : undefined);
  const author = commitAuthor(deps, input.appSlug);
  const title = runTitle(result?.finalText ?? "", input.title);
  const { octokit } = repository;
  progress.step("pushed");
  const published = await publishWorkspace({
    workspace: ws.workspace,
    mirror: ws.checkout.mirror,
    url: ws.checkout.url,
    // A fresh token: the run may have outlived the one the checkout used.
    auth: { token: await deps.installationToken(repository.installationId) },
    baseSha: ws.from,
    branch: ws.checkout.branch,
    defaultBranch: input.defaultBranch,
    ...(input.served && { servedBranch: ws.checkout.branch }),
    commit: {
      message: title,
      author,
      // The app's own run (an automation) has no one else to credit.
      coAuthors:
        requester === null || requester === author.name
          ? []
          : [await coAuthor(octokit, requester, requesterId)],
    },
    // Our own branch may be rewritten, but only from what it was when the job began.
    lease: input.served ? undefined : ws.remoteSha,
    signal: run.signal,
  });
  const pushedBefore = input.asked === true && ws.remoteSha !== null;
  if (input.served || !(published.pushed || pushedBefore)) return published;
  const body = renderPullRequestBody({
    summary: input.summary ?? result?.finalText ?? title,
    tests: result && testsOf(result),
    look: result?.look?.text,
    files: published.files,
    // The job's so far: a kept run's counted once, as the attempt that delivers it spends nothing.
    cost: runCost(granted.settings, result, progress.view.costUsd),
    durationMs: Date.now() - progress.view.startedAt,
    fixes: input.fixes,
    requester,
    jobUrl: jobUrl(deps.publicUrl, job.id),
  });
  const pullRequest = await publishPullRequest(octokit, {
    owner: repository.owner,
    repo: repository.name,
    head: ws.checkout.branch,
    base: input.defaultBranch,
    title,
    body,
    knownNumber: input.knownPr === undefined ? job.prNumber : input.knownPr,
  });
  progress.step("pull_request");
  const recorded = { branch: ws.checkout.branch, prNumber: pullRequest.number };
  await updateJob(deps.db.pool, job.id, recorded);
  return { ...published, pullRequest };
}
