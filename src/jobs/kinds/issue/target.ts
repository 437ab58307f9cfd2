// Which branch a job works on, and whether it may push there.
import { chooseIssueBranch, isValidBranchName } from "../../../github/branch-name.ts";
import type { IssueContext } from "../../../github/issue-context.ts";
import type { Conversation } from "../../../store/conversations.ts";
import type { IssueJob } from "../../../store/jobs.ts";
import type { Mode } from "./request.ts";

export type Target =
  | {
      ok: true;
      branch: string;
      /** Someone's pull request branch rather than our own vmpilot/ branch. */
      served: boolean;
      /** The pull request the job is about (reviews, threads), if any. */
      prNumber: number | null;
      /**
       * A fix on a fork's pull request: the work starts at its head, and comes back as suggestions
       * on it (modes/suggest.ts), pushed nowhere.
       */
      suggests?: true;
    }
  | { ok: false; headline: string; text: string };

export function chooseTarget(input: {
  conversation: Conversation;
  job: IssueJob;
  mode: Mode;
  /** The mode pushes the agent's work (see PipelineMode.pushes). */
  pushes: boolean;
  issue: IssueContext;
  title: string;
  defaultBranch: string;
}): Target {
  const { conversation, job, mode, pushes, issue } = input;
  const pr = issue.pullRequest;
  if (conversation.kind === "issue") {
    // The conversation's own pull request, if it opened one, is where reviews and threads live.
    const prNumber = pr ? job.number : conversation.prNumber;
    if ((mode === "review" || mode === "threads") && prNumber === null) {
      return {
        ok: false,
        headline: "Nothing to review yet",
        text: `There is no pull request for #${conversation.number} yet: ask for a fix first.`,
      };
    }
    const branch = chooseIssueBranch({
      existing: conversation.branch,
      number: conversation.number,
      title: input.title,
    });
    return { ok: true, branch, served: false, prNumber };
  }
  if (!pr) throw new Error(`pull request #${job.number} has no pull request data`);
  if (pr.fromFork) {
    // A branch of the job's own in its checkout, which is never pushed.
    const own = { branch: `vmpilot/job-${job.id}`, served: false, prNumber: job.number };
    if (pushes && mode === "fix") return { ok: true, ...own, suggests: true };
    if (pushes) {
      return {
        ok: false,
        headline: "Cannot push to a fork",
        text: `This pull request comes from ${pr.headRepo ?? "a deleted fork"}, where vmpilot has no push rights. \`fix\` answers here with suggestions, and \`plan\` and \`review\` work too.`,
      };
    }
    // Read-only work on a fork's pull request: the diff is in the context; check out the base.
    return { ok: true, ...own };
  }
  if (!isValidBranchName(pr.headRef) || pr.headRef === input.defaultBranch) {
    return {
      ok: false,
      headline: "Cannot work on this branch",
      text: `vmpilot only pushes to branches named with letters, digits, \`.\`, \`_\`, \`-\` and \`/\`, and never to the default branch; this pull request's branch is \`${pr.headRef.replaceAll("`", "'")}\`.`,
    };
  }
  return { ok: true, branch: pr.headRef, served: true, prNumber: job.number };
}
