// Webhook payloads → one shape the intake works with. Probot checks the signature but not the
// shape, so each payload is parsed here first: a field missing or of the wrong type is a
// MalformedDelivery naming it, not a TypeError from somewhere inside the intake.
import { z } from "zod";
import { PermanentError } from "../errors.ts";
import type { TriggerTarget } from "../store/job-context.ts";
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

/** A payload without a field the intake reads, or with one of another type. */
export class MalformedDelivery extends PermanentError {
  override name = "MalformedDelivery";
}

// Only the fields the mapping reads; GitHub sends many more.
const id = z.number().int();
const user = z.object({ login: z.string() });
const common = {
  repository: z.object({
    id,
    full_name: z.string(),
    owner: user,
    name: z.string(),
    clone_url: z.string(),
    default_branch: z.string(),
  }),
  installation: z.object({ id }, "missing: not a GitHub App delivery"),
  sender: z.object({ login: z.string(), id, type: z.string() }),
  action: z.string(),
};
const issue = z.object({
  id,
  number: id,
  title: z.string(),
  body: z.string().nullish(),
  html_url: z.string(),
  locked: z.boolean().optional(),
  state: z.string().optional(),
  user: user.nullish(),
  pull_request: z.unknown().optional(),
  updated_at: z.string(),
});
const pullRequest = z.object({
  number: id,
  title: z.string(),
  locked: z.boolean(),
  state: z.string(),
  user: user.nullish(),
});
const comment = z.object({ id, body: z.string(), html_url: z.string() });
const issuesPayload = z.object({
  ...common,
  issue,
  label: z.object({ id: id.optional(), name: z.string() }).nullish(),
  assignee: z.object({ id, login: z.string() }).nullish(),
});
const issueCommentPayload = z.object({ ...common, issue, comment });
const reviewCommentPayload = z.object({ ...common, pull_request: pullRequest, comment });
const reviewPayload = z.object({
  ...common,
  pull_request: pullRequest,
  review: z.object({ id, body: z.string().nullish(), state: z.string(), html_url: z.string() }),
});

/** A webhook payload parsed, or a MalformedDelivery naming the first field that is wrong. */
export function parsePayload<T>(schema: z.ZodType<T>, payload: unknown, event: string): T {
  const parsed = schema.safeParse(payload);
  if (parsed.success) return parsed.data;
  const first = parsed.error.issues[0];
  const where = first?.path.join(".") || "payload";
  throw new MalformedDelivery(`malformed ${event} webhook: ${where}: ${first?.message}`);
}

type Common = z.infer<z.ZodObject<typeof common>>;

function commonFields(payload: Common) {
  const repo = payload.repository;
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
function issuesKey(payload: z.infer<typeof issuesPayload>): string {
  const issue = payload.issue;
  if (payload.action === "labeled") {
    const label = payload.label;
    return `label:${issue.id}:${label?.id ?? label?.name}:${issue.updated_at}`;
  }
  if (payload.action === "assigned") {
    return `assigned:${issue.id}:${payload.assignee?.id}:${issue.updated_at}`;
  }
  return `issue:${issue.id}:${payload.action}`;
}

export function fromIssues(raw: unknown): TriggerDelivery {
  const payload = parsePayload(issuesPayload, raw, "issues");
  const issue = payload.issue;
  return {
    ...commonFields(payload),
    triggerKey: issuesKey(payload),
    input: {
      event: "issues",
      action: payload.action,
      sender: payload.sender,
      text: issue.body,
      label: payload.label?.name,
      assignee: payload.assignee?.login,
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

export function fromIssueComment(raw: unknown): TriggerDelivery {
  const payload = parsePayload(issueCommentPayload, raw, "issue_comment");
  const issue = payload.issue;
  return {
    ...commonFields(payload),
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

export function fromReviewComment(raw: unknown): TriggerDelivery {
  const payload = parsePayload(reviewCommentPayload, raw, "pull_request_review_comment");
  const pr = payload.pull_request;
  return {
    ...commonFields(payload),
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

export function fromReview(raw: unknown): TriggerDelivery {
  const payload = parsePayload(reviewPayload, raw, "pull_request_review");
  const pr = payload.pull_request;
  return {
    ...commonFields(payload),
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
