// The 👀 acknowledgement on whatever the trigger was written on.
import type { ProbotOctokit } from "probot";
import type { TriggerTarget } from "../store/job-context.ts";
import type { Item } from "./comments.ts";

/** Adds 👀; GitHub answers 200 instead of 201 when it is already there, so repeating is harmless. */
export async function addEyes(
  octokit: ProbotOctokit,
  item: Item,
  target: TriggerTarget,
): Promise<void> {
  const repo = { owner: item.owner, repo: item.repo, content: "eyes" as const };
  switch (target.type) {
    case "issue_comment":
      await octokit.rest.reactions.createForIssueComment({ ...repo, comment_id: target.id });
      return;
    case "review_comment":
      await octokit.rest.reactions.createForPullRequestReviewComment({
        ...repo,
        comment_id: target.id,
      });
      return;
    case "issue":
    case "review":
      await octokit.rest.reactions.createForIssue({ ...repo, issue_number: item.number });
      return;
  }
}
