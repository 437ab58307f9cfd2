// Issue and pull request comments written by the app. Every body passes secret redaction here, so
// no caller can post a token by accident.
import type { ProbotOctokit } from "probot";
import { redact } from "../log/redact.ts";

export interface Item {
  owner: string;
  repo: string;
  /** Issue or pull request number. */
  number: number;
}

// GitHub rejects comment bodies over 65536 characters.
const MAX_BODY = 65_000;

function clean(body: string): string {
  const redacted = redact(body);
  return redacted.length > MAX_BODY ? `${redacted.slice(0, MAX_BODY)}\n\n…(truncated)` : redacted;
}

/** Posts a comment and returns its id. */
export async function postComment(
  octokit: ProbotOctokit,
  item: Item,
  body: string,
): Promise<number> {
  const { data } = await octokit.rest.issues.createComment({
    owner: item.owner,
    repo: item.repo,
    issue_number: item.number,
    body: clean(body),
  });
  return data.id;
}

export async function editComment(
  octokit: ProbotOctokit,
  item: Pick<Item, "owner" | "repo">,
  commentId: number,
  body: string,
): Promise<void> {
  await octokit.rest.issues.updateComment({
    owner: item.owner,
    repo: item.repo,
    comment_id: commentId,
    body: clean(body),
  });
}

/** A hidden line that ties a comment to a job, so a retried job finds the comment it posted. */
export function jobMarker(jobId: number): string {
  return `<!-- vmpilot:job:${jobId} -->`;
}

/** The id of the app's comment on the item that carries `marker`, posted at or after `since`. */
export async function findMarkedComment(
  octokit: ProbotOctokit,
  item: Item,
  marker: string,
  since: Date,
): Promise<number | undefined> {
  const comments = await octokit.paginate(octokit.rest.issues.listComments, {
    owner: item.owner,
    repo: item.repo,
    issue_number: item.number,
    since: since.toISOString(),
    per_page: 100,
  });
  return comments.find((comment) => comment.body?.includes(marker))?.id;
}
