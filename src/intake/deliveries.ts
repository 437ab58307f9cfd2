// Webhook payloads → one shape the intake works with. Pure field mapping.
import type { Context } from "probot";
import type { TriggerTarget } from "../github/job-context.ts";
import type { TriggerInput } from "./trigger.ts";

export interface TriggerDelivery {
  input: TriggerInput;
  installationId: number;
  repository: {
    id: number;
    fullName: string;
    owner: string;
    name: string;
    cloneUrl: string;
    defaultBranch: string;
  };
  number: number;
  itemKind: "issue" | "pull_request";
  title: string;
  htmlUrl: string;
  target: TriggerTarget;
  requester: string;
  requesterId: number;
  /**
   * The event itself by GitHub's ids, the same in every delivery of it: a signed body replayed
   * under a new delivery id carries the same key and makes no second job.
   */
  triggerKey: string;
}

export type IssuesPayload = Context<
  "issues.opened" | "issues.labeled" | "issues.assigned"
>["payload"];
export type IssueCommentPayload = Context<"issue_comment.created">["payload"];
export type ReviewCommentPayload = Context<"pull_request_review_comment.created">["payload"];
export type ReviewPayload = Context<"pull_request_review.submitted">["payload"];

interface Common {
  repository: IssuesPayload["repository"];
  installation?: { id: number };
  sender: { login: string; id: number; type: string };
}

function common(payload: Common) {
  const repo = payload.repository;
  if (!payload.installation)
    throw new Error("webhook without installation: not a GitHub App delivery");
  return {
    installationId: payload.installation.id,
    repository: {
      id: repo.id,
      fullName: repo.full_name,
      owner: repo.owner.login,
      name: repo.name,
      cloneUrl: repo.clone_url,
      defaultBranch: repo.default_branch,
    },
    requester: payload.sender.login,
    requesterId: payload.sender.id,
  };
}

/**
 * Labels and assignments name no event id of their own; the item's updated_at, which each of them
 * moves, tells a label added again later (or re-assigned) from a replay of the first. Comments and
 * reviews have their own ids; only their creation and submission trigger, and an edit (were it
 * handled) would be a new event only with the comment's updated_at in its key.
 */
function issuesKey(payload: IssuesPayload): string {
  const issue = payload.issue;
  if (payload.action === "labeled") {
    const label = "label" in payload ? payload.label : undefined;
    return `label:${issue.id}:${label?.id ?? label?.name}:${issue.updated_at}`;
  }
  if (payload.action === "assigned") {
    const assignee = "assignee" in payload ? payload.assignee : undefined;
    return `assigned:${issue.id}:${assignee?.id}:${issue.updated_at}`;
  }
  return `issue:${issue.id}:${payload.action}`;
}

export function fromIssues(payload: IssuesPayload): TriggerDelivery {
  const issue = payload.issue;
  return {
    ...common(payload),
    triggerKey: issuesKey(payload),
    input: {
      event: "issues",
      action: payload.action,
      sender: payload.sender,
      text: issue.body,
      label: "label" in payload ? payload.label?.name : undefined,
      assignee: "assignee" in payload ? (payload.assignee?.login ?? undefined) : undefined,
      item: {
        locked: Boolean(issue.locked),
        state: issue.state ?? "open",
        authorLogin: issue.user?.login,
      },
    },
    number: issue.number,
    itemKind: issue.pull_request ? "pull_request" : "issue",
    title: issue.title,
    htmlUrl: issue.html_url,
    target: { type: "issue" },
  };
}

export function fromIssueComment(payload: IssueCommentPayload): TriggerDelivery {
  const issue = payload.issue;
  return {
    ...common(payload),
    triggerKey: `comment:${payload.comment.id}:${payload.action}`,
    input: {
      event: "issue_comment",
      action: payload.action,
      sender: payload.sender,
      text: payload.comment.body,
      item: {
        locked: Boolean(issue.locked),
        state: issue.state ?? "open",
        authorLogin: issue.user?.login,
      },
    },
    number: issue.number,
    itemKind: issue.pull_request ? "pull_request" : "issue",
    title: issue.title,
    htmlUrl: payload.comment.html_url,
    target: { type: "issue_comment", id: payload.comment.id },
  };
}

export function fromReviewComment(payload: ReviewCommentPayload): TriggerDelivery {
  const pr = payload.pull_request;
  return {
    ...common(payload),
    triggerKey: `review_comment:${payload.comment.id}:${payload.action}`,
    input: {
      event: "pull_request_review_comment",
      action: payload.action,
      sender: payload.sender,
      text: payload.comment.body,
      item: { locked: Boolean(pr.locked), state: pr.state, authorLogin: pr.user?.login },
    },
    number: pr.number,
    itemKind: "pull_request",
    title: pr.title,
    htmlUrl: payload.comment.html_url,
    target: { type: "review_comment", id: payload.comment.id },
  };
}

export function fromReview(payload: ReviewPayload): TriggerDelivery {
  const pr = payload.pull_request;
  return {
    ...common(payload),
    triggerKey: `review:${payload.review.id}:${payload.action}`,
    input: {
      event: "pull_request_review",
      action: payload.action,
      sender: payload.sender,
      text: payload.review.body,
      reviewState: payload.review.state.toLowerCase(),
      item: { locked: Boolean(pr.locked), state: pr.state, authorLogin: pr.user?.login },
    },
    number: pr.number,
    itemKind: "pull_request",
    title: pr.title,
    htmlUrl: payload.review.html_url,
    target: { type: "review", id: payload.review.id },
  };
}
