// A fix on a fork's pull request, where vmpilot may push nowhere (target.ts). The agent works on
// the pull request's head, which the worker fetched from this repository's `refs/pull/<n>/head`,
// with the repository's instructions read from the base branch, never the fork's (the settings
// come from this repository as for every job, never from the checkout). Its change is then posted
// as one review of suggestions, the contributor's to commit, and what they cannot carry as a
// patch in the review's body.
import type { RepoSettings } from "../../../../config/repo-config.ts";
import { renderFinal } from "../../../../github/progress-comment.ts";
import { postSuggestions } from "../../../../github/suggestion-review.ts";
import { type DiffFile, parseDiff } from "../../../../github/suggestions.ts";
import { VMPILOT_AUTHOR } from "../../../../workspace/git/commit.ts";
import {
  baseCommit,
  committedFiles,
  type PullChanges,
  pullRequestChanges,
} from "../../../../workspace/git/fork.ts";
import type { JobRun } from "../../../run/agent.ts";
import { finalView } from "../../../run/final.ts";
import type { IssueAttempt, PipelineOutcome } from "../attempt.ts";
import type { ModeJob, PipelineMode } from "./mode.ts";

/** A diff cut mid-file: its last file is left out rather than shown in part. */
function parsed(text: string, cut: boolean): DiffFile[] {
  const files = parseDiff(text);
  if (cut) files.pop();
  return files;
}

const plural = (count: number, noun: string) => `${count} ${noun}${count === 1 ? "" : "s"}`;

async function post(
  { attempt, issue, granted }: ModeJob,
  result: JobRun,
  changes: PullChanges,
): Promise<PipelineOutcome> {
  const posted = await postSuggestions(attempt.octokit, {
    ...attempt.item,
    commitId: changes.head,
    summary: result.finalText,
    change: parsed(changes.diff, changes.cut.diff),
    pull: parsed(changes.pullDiff, changes.cut.pullDiff),
    cut: changes.cut.diff,
  });
  const patch = posted.patched > 0 ? ` and a patch of ${plural(posted.patched, "file")}` : "";
  const headline = `Suggested ${plural(posted.suggestions, "change")}${patch} in a review`;
  return end(attempt, result, granted.settings, headline, {
    pullRequest: { number: issue.number, url: posted.url },
  });
}

function end(
  attempt: IssueAttempt,
  result: JobRun,
  settings: RepoSettings,
  headline: string,
  more: { pullRequest?: { number: number; url: string }; changed?: false },
): Promise<PipelineOutcome> {
  const body = renderFinal({
    ...finalView(attempt.job, attempt.progress, result, settings),
    headline,
    ...more,
    summary: result.finalText,
    finishedAt: Date.now(),
  });
  return attempt.end("succeeded", body);
}

export const suggest: PipelineMode = {
  steps: ["acknowledged", "workspace", "agent", "tests"],
  pushes: false,
  readsItem: true,
  runsSetup: true,
  async inWorkspace({ attempt, issue }, ws) {
    const mirror = { path: ws.checkout.mirror, url: ws.checkout.url };
    const base = issue.pullRequest?.baseRef ?? attempt.context.defaultBranch;
    const sha = await baseCommit(mirror, base);
    return { suggesting: { base: sha, instructions: committedFiles(mirror.path, sha) } };
  },
  async finish(job, { ws, result, extras }) {
    const { attempt } = job;
    if (!extras.suggesting) throw new Error(`job ${attempt.job.id} has no base to suggest against`);
    const changes = await pullRequestChanges({
      workspace: ws.workspace,
      mirror: ws.checkout.mirror,
      head: ws.from,
      base: extras.suggesting.base,
      // The checkout's own commit, read as data and never pushed.
      commit: { message: "vmpilot's suggestions", author: VMPILOT_AUTHOR },
      signal: job.run.signal,
    });
    if (changes) return post(job, result, changes);
    const ok = result.reason === "end_turn";
    const headline = ok
      ? "Answered, without changing the code"
      : "Done: no changes to the code, so no suggestions";
    return end(attempt, result, job.granted.settings, headline, { changed: false });
  },
};
