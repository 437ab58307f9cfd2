// How a chat turn ends, whatever ended it: the reply's last event, and the turn remembered for the
// next request (the conversation's hash with this reply, the stored messages so far, and the
// workspace, which a turn that did not get to run keeps from the previous one).
import { redact } from "../../../log/redact.ts";
import { getApiConversation, lastTurn, saveChatTurn } from "../../../store/api-conversations.ts";
import { ReplyEnd } from "../../../store/job-event-kinds.ts";
import { appendJobEvent, listJobEvents } from "../../../store/job-events.ts";
import { getJob, type Job, updateJob } from "../../../store/jobs.ts";
import { extendHash } from "../../chat-reply/history-hash.ts";
import { renderReply } from "../../chat-reply/reply.ts";
import { readChatTurnRequest } from "../../queue/chat-turn-request.ts";
import { type JobRun, testsOf } from "../../run/agent.ts";
import type { OpenDeps } from "../../run/deps.ts";

export type Ending =
  | { error: string }
  | {
      /** Undefined when the message only asked for the pull request. */
      result: JobRun | undefined;
      pullRequest: { url: string } | { none: string } | undefined;
      commitSha: string | null;
      bundle: Buffer | null;
    };

export async function endTurn(
  deps: Pick<OpenDeps, "db">,
  job: Job,
  ending: Ending,
): Promise<"succeeded" | "failed"> {
  const db = deps.db.pool;
  const fresh = await getJob(db, job.id);
  const costUsd = fresh?.costUsd ?? job.costUsd;
  const result = "error" in ending ? undefined : ending.result;
  const pullRequest = "error" in ending ? undefined : ending.pullRequest;
  const error =
    "error" in ending
      ? ending.error
      : result?.reason === "error"
        ? (result.error?.message ?? "the agent failed")
        : undefined;
  const tests = result && testsOf(result)?.outcome;
  await appendJobEvent(db, job.id, ReplyEnd, {
    ...(error !== undefined && { error: redact(error).slice(0, 2000) }),
    ...(result?.detail && { detail: redact(result.detail) }),
    ...(tests && { tests }),
    ...(pullRequest && "url" in pullRequest && { pullRequestUrl: pullRequest.url }),
    ...(pullRequest && "none" in pullRequest && { detail: pullRequest.none }),
    usage: result?.usage ?? fresh?.usage ?? {},
    costUsd,
    priceKnown: result?.priceKnown ?? true,
  });
  const previous = "error" in ending ? await lastTurn(db, job.conversationId) : undefined;
  const workspace =
    "error" in ending
      ? { commitSha: previous?.commitSha ?? null, bundle: previous?.bundle ?? null }
      : { commitSha: ending.commitSha, bundle: ending.bundle };
  const reply = renderReply(await listJobEvents(db, job.id, 0, 100_000));
  const conversation = await getApiConversation(db, job.conversationId);
  await saveChatTurn(db, {
    conversationId: job.conversationId,
    jobId: job.id,
    historyHash: extendHash(readChatTurnRequest(job).askedHash, {
      role: "assistant",
      text: reply,
    }),
    messageCount: conversation?.messageCount ?? 0,
    ...workspace,
  });
  const status = error === undefined ? "succeeded" : "failed";
  await updateJob(db, job.id, {
    status,
    ...(error !== undefined && { error: redact(error).slice(0, 2000) }),
  });
  return status;
}
