// The first step of an issue job's work: what it asks (request.ts), its conversation so far and the
// item it is on, as much of it as its mode shows the model.
import { gatherIssueContext, type IssueContext } from "../../../github/issue-context.ts";
import { getConversation } from "../../../store/conversations.ts";
import type { JobDeps } from "../../run/deps.ts";
import { loadConversation } from "../../run/history.ts";
import type { IssueAttempt } from "./attempt.ts";
import { MODES } from "./modes/index.ts";
import type { Ended, ModeJob, PipelineMode } from "./modes/mode.ts";
import { resolveRequest } from "./request.ts";

export type Gathered = Pick<
  ModeJob,
  "request" | "conversation" | "history" | "itemSeen" | "issue"
> & { mode: PipelineMode };

export async function gather(deps: JobDeps, attempt: IssueAttempt): Promise<Gathered | Ended> {
  const db = deps.db.pool;
  const { job, context, octokit, progress } = attempt;
  const request = await resolveRequest(db, job);
  if ("nothing" in request) {
    return { ended: await attempt.notice("succeeded", "ℹ️", "Nothing to do", request.nothing) };
  }
  const mode = MODES[request.mode];
  progress.view.steps = mode.steps;
  progress.step("workspace", `${request.mode} requested by @${job.requester}`);

  const conversation = await getConversation(db, job.conversationId);
  if (!conversation)
    throw new Error(`conversation ${job.conversationId} of job ${job.id} does not exist`);
  const history = await loadConversation(db, conversation.id, job.id);
  const itemSeen = history.messages.length > 0;
  const issue = mode.readsItem
    ? await gatherIssueContext(octokit, {
        owner: context.owner,
        repo: context.name,
        number: job.number,
        kind: context.itemKind,
        excludeCommentIds: job.triggerCommentId === null ? [] : [job.triggerCommentId],
        botLogin: `${context.appSlug}[bot]`,
        since: itemSeen ? request.previous?.createdAt : undefined,
        withDiff: context.itemKind === "pull_request" && (!itemSeen || mode.readsDiff === true),
      })
    : titleOnly(job.number, context.title);
  return { mode, request, conversation, history, itemSeen, issue };
}

function titleOnly(number: number, title: string): IssueContext {
  return { kind: "pull_request", number, title, body: "", author: "", comments: [] };
}
