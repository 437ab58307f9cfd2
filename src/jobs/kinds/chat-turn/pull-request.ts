// `/vmpilot pr` in a chat-face conversation on a repository: the workspace's branch pushed by the
// worker (never from inside the workspace) and a draft pull request opened or updated for it.
import { runTitle } from "../../../agent/summary.ts";
import type { RepoSettings } from "../../../config/repo-config.ts";
import { publishPullRequest, renderPullRequestBody } from "../../../github/pull-request.ts";
import { type Job, updateJob } from "../../../store/jobs.ts";
import { VMPILOT_AUTHOR } from "../../../workspace/git/commit.ts";
import { publishWorkspace } from "../../../workspace/git/publish.ts";
import type { Checkout, Workspace } from "../../../workspace/index.ts";
import { readChatTurnRequest } from "../../queue/chat-turn-request.ts";
import { type JobRun, runCost, testsOf } from "../../run/agent.ts";
import type { JobDeps } from "../../run/deps.ts";

export interface ChatPullRequestInput {
  job: Job & { installationId: number };
  workspace: Workspace;
  checkout: Checkout;
  branch: string;
  /** The turn's run, when the message asked for more than the pull request. */
  result: JobRun | undefined;
  settings: RepoSettings;
  startedAt: number;
  signal: AbortSignal;
}

/** Resolves to the pull request's URL, or to a sentence saying why there is none. */
export async function openChatPullRequest(
  deps: JobDeps,
  input: ChatPullRequestInput,
): Promise<{ url: string } | { none: string }> {
  const { job, checkout, branch } = input;
  const title = runTitle(input.result?.finalText ?? "", job.instruction || "vmpilot chat changes");
  const pushed = await publishWorkspace({
    workspace: input.workspace,
    mirror: checkout.mirror,
    url: checkout.url,
    auth: { token: await deps.installationToken(job.installationId) },
    baseSha: checkout.baseSha,
    commit: { message: title, author: deps.commitAuthor ?? VMPILOT_AUTHOR },
    branch,
    defaultBranch: checkout.baseBranch,
    // The conversation's branch as this turn found it, or none yet: a regenerated turn may replace
    // it.
    lease: checkout.continued ? checkout.baseSha : null,
    signal: input.signal,
  });
  if (!pushed.pushed && !checkout.continued) {
    return { none: "There are no changes to open a pull request with yet." };
  }
  const [owner = "", repo = ""] = job.repo.split("/");
  const octokit = await deps.auth(job.installationId);
  const tests = input.result && testsOf(input.result);
  const pr = await publishPullRequest(octokit, {
    owner,
    repo,
    head: branch,
    base: checkout.baseBranch,
    title,
    body: renderPullRequestBody({
      summary: input.result?.finalText ?? title,
      tests,
      files: pushed.files,
      cost: runCost(input.settings, input.result, job.costUsd + (input.result?.usage.costUsd ?? 0)),
      durationMs: Date.now() - input.startedAt,
      // The operator's key is no one's login: a mention would name whoever holds "operator".
      requester: readChatTurnRequest(job).operator ? null : job.requester,
      jobUrl: `${deps.publicUrl}/jobs/${job.id}`,
    }),
    knownNumber: job.prNumber,
  });
  await updateJob(deps.db.pool, job.id, { branch, prNumber: pr.number });
  return { url: pr.url };
}
