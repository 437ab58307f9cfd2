// Which branch a job works on, and whether it may push there.
import { chooseIssueBranch, isValidBranchName } from "../../github/branch-name.ts";
import type { IssueContext } from "../../github/issue-context.ts";
import type { Chat } from "../../store/chats.ts";
import type { IssueJob } from "../../store/jobs.ts";
import { MODES } from "./modes/index.ts";
import type { Mode } from "./request.ts";

export type Target =
  | {
      ok: true;
      branch: string;
      /** Someone's pull request branch rather than our own vmpilot/ branch. */
      served: boolean;
      /** The pull request the job is about (reviews, threads), if any. */
      prNumber: number | null;
    }
  | { ok: false; headline: string; text: string };

export function chooseTarget(input: {
  chat: Chat;
  job: IssueJob;
  mode: Mode;
  issue: IssueContext;
  title: string;
  defaultBranch: string;
}): Target {
  const { chat, job, mode, issue } = input;
  const pr = issue.pullRequest;
  if (chat.kind === "issue") {
    // The chat's own pull request, if it opened one, is where reviews and threads live.
    const prNumber = pr ? job.number : chat.prNumber;
    if ((mode === "review" || mode === "threads") && prNumber === null) {
      return {
        ok: false,
        headline: "Nothing to review yet",
        text: `There is no pull request for #${chat.number} yet: ask for a fix first.`,
      };
    }
    const branch = chooseIssueBranch({
      existing: chat.branch,
      number: chat.number,
      title: input.title,
    });
    return { ok: true, branch, served: false, prNumber };
  }
  if (!pr) throw new Error(`pull request #${job.number} has no pull request data`);
  if (pr.fromFork) {
    if (MODES[mode].pushes) {
      return {
        ok: false,
        headline: "Cannot push to a fork",
        text: `This pull request comes from ${pr.headRepo ?? "a deleted fork"}, where vmpilot has no push rights. \`plan\` and \`review\` still work here; for changes, open the pull request from a branch of this repository.`,
      };
    }
    // Read-only work on a fork's pull request: the diff is in the context; check out the base.
    return { ok: true, branch: `vmpilot/job-${job.id}`, served: false, prNumber: job.number };
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
