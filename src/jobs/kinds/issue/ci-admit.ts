// Whether a CI fix job the intake let through still goes ahead: the repository wants it, the pull
// request is open and still at the head vmpilot pushed (nobody pushed after it), and the fix
// attempts are not used up. The first job past the cap says so on the pull request, once.
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import type { RepoSettings } from "../../../config/repo-config.ts";
import { postComment } from "../../../github/comments.ts";
import {
  ciFixAttempts,
  claimCapNotice,
  pushedAfterVmpilot,
  pushState,
} from "../../../store/ci-loop.ts";
import type { JobContext } from "../../../store/job-context.ts";
import type { IssueJob } from "../../../store/jobs.ts";
import type { Queryable } from "../../../store/sql.ts";

const PullHead = z.object({
  state: z.string(),
  head: z.object({ sha: z.string(), repo: z.object({ id: z.number() }).nullable() }),
  base: z.object({ repo: z.object({ id: z.number() }) }),
});

/** Why the CI fix should not run, or undefined when it should. */
export async function ciFixUnwanted(
  db: Queryable,
  octokit: ProbotOctokit,
  job: IssueJob,
  context: JobContext,
  settings: RepoSettings,
): Promise<string | undefined> {
  const max = settings.ci.autofix ? settings.ci.maxFixAttempts : 0;
  if (max === 0) return "CI fixes are turned off for this repository";
  const pushed = await pushState(db, job.conversationId);
  if (!context.headSha || pushed.sha !== context.headSha) return "vmpilot pushed again since";
  const item = { owner: context.owner, repo: context.name, number: job.number };
  const { data } = await octokit.rest.pulls.get({
    owner: item.owner,
    repo: item.repo,
    pull_number: job.number,
  });
  const pr = PullHead.parse(data);
  if (pr.state !== "open") return "the pull request is closed";
  const after = pushedAfterVmpilot(pr.head.sha, context.headSha);
  if (after) return after;
  if (pr.head.repo?.id !== pr.base.repo.id) return "the pull request comes from a fork";
  const attempts = await ciFixAttempts(db, job.conversationId, job.id);
  if (attempts < max) return undefined;
  if (await claimCapNotice(db, job.conversationId)) {
    const tries = max === 1 ? "once" : `${max} times`;
    await postComment(
      octokit,
      item,
      `⏹ vmpilot tried ${tries} to make the checks of this pull request pass and stops here (\`ci.maxFixAttempts: ${max}\`). Mention @${context.appSlug} to ask for another try.`,
    );
  }
  return `CI fix attempts used up (${attempts} of ${max})`;
}
