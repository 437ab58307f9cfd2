// The first step of a job: what it asks (request.ts), the settings it runs with, its conversation
// so far and the item it is on, as much of it as its mode shows the model.
import { gatherIssueContext, type IssueContext } from "../../../github/issue-context.ts";
import type { RepoConfigLoad } from "../../../github/repo-config-loader.ts";
import { getConversation } from "../../../store/conversations.ts";
import { loadConversation } from "../../run/history.ts";
import { jobSettings } from "../../run/settings.ts";
import { MODES } from "./modes/index.ts";
import type { Ended, ModeJob, PipelineMode } from "./modes/mode.ts";
import { resolveRequest } from "./request.ts";
import type { PipelineDeps } from "./run.ts";
import type { Session } from "./session.ts";

export type Gathered = Pick<
  ModeJob,
  "request" | "granted" | "conversation" | "history" | "itemSeen" | "issue"
> & { mode: PipelineMode };

export async function gather(
  deps: PipelineDeps,
  session: Session,
  /** The repository's config as the acknowledgement read it; read again when not given. */
  repoConfig: RepoConfigLoad | undefined,
): Promise<Gathered | Ended> {
  const db = deps.db.pool;
  const { job, context, octokit, progress } = session;
  const request = await resolveRequest(db, job);
  if ("nothing" in request) {
    return { ended: await session.notice("succeeded", "ℹ️", "Nothing to do", request.nothing) };
  }
  const mode = MODES[request.mode];
  progress.view.steps = mode.steps;
  progress.step("workspace", `${request.mode} requested by @${job.requester}`);

  const granted = await jobSettings(db, octokit, job, {
    jobUrl: session.url,
    command: context.command,
    owner: context.owner,
    repo: context.name,
    defaults: deps.defaults,
    repoConfig,
  });
  if (!granted.ok) {
    if (granted.body) return { ended: await session.end("failed", granted.body, granted.error) };
    return { ended: await session.notice("failed", "⏹", "Limit reached", granted.error) };
  }
  if (!granted.settings.enabled) {
    const text = "This repository's settings say `enabled: false`.";
    return { ended: await session.notice("refused", "⏸", "vmpilot is turned off here", text) };
  }

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
  return { mode, request, granted, conversation, history, itemSeen, issue };
}

function titleOnly(number: number, title: string): IssueContext {
  return { kind: "pull_request", number, title, body: "", author: "", comments: [] };
}
