// How a chat turn ends, whatever ended it: the reply's last event, and the turn remembered for the
// next request (the conversation's hash with this reply, the stored messages so far, and the
// workspace, which a turn that did not get to run keeps from the previous one).
import { redact } from "../../../log/redact.ts";
import { getApiConversation, lastTurn, saveChatTurn } from "../../../store/api-conversations.ts";
import { ReplyEnd } from "../../../store/job-event-kinds.ts";
import { appendJobEventWith, listJobEvents } from "../../../store/job-events.ts";
import { getJob, type Job } from "../../../store/jobs.ts";
import { extendHash } from "../../chat-reply/history-hash.ts";
import { renderReply } from "../../chat-reply/reply.ts";
import { readChatTurnRequest } from "../../queue/chat-turn-request.ts";
import { type JobRun, testsOf } from "../../run/agent.ts";
import type { RowStatus } from "../../run/attempt.ts";
import type { Delivered } from "../../run/deliver.ts";
import type { OpenDeps } from "../../run/deps.ts";

/** What a turn that got to run leaves. */
export interface Turn {
  /** Undefined when the message only asked for the pull request. */
  result: JobRun | undefined;
  /** What `/vmpilot pr` pushed and opened. */
  delivered: Delivered | undefined;
  commitSha: string | null;
  bundle: Buffer | null;
}

/** `error` comes redacted, as the job's row has it. */
export async function endTurn(
  deps: Pick<OpenDeps, "db">,
  job: Job,
  status: RowStatus,
  error: string | undefined,
  turn: Turn | undefined,
): Promise<void> {
  // A cancelled turn is none: the conversation stays at its last finished turn.
  if (status === "cancelled") return;
  const db = deps.db.pool;
  const fresh = await getJob(db, job.id);
  const result = turn?.result;
  const pullRequest = turn?.delivered?.pullRequest;
  const tests = result && testsOf(result)?.outcome;
  // The reply's end and the turn it leaves show together: a client that has the end may ask again
  // at once, and must find this turn to continue the conversation rather than branch it.
  const ending = {
    ...(error !== undefined && { error }),
    ...(result?.detail && { detail: redact(result.detail) }),
    ...(tests && { tests }),
    ...(pullRequest && { pullRequestUrl: pullRequest.url }),
    ...(turn?.delivered &&
      !pullRequest && { detail: "There are no changes to open a pull request with yet." }),
    usage: result?.usage ?? fresh?.usage ?? {},
    costUsd: fresh?.costUsd ?? job.costUsd,
    priceKnown: result?.priceKnown ?? true,
  };
  await appendJobEventWith(db, job.id, ReplyEnd, ending, async (tx) => {
    const workspace = turn ?? (await lastTurn(tx, job.conversationId));
    const reply = renderReply(await listJobEvents(tx, job.id, 0, 100_000));
    const asked = readChatTurnRequest(job).askedHash;
    const conversation = await getApiConversation(tx, job.conversationId);
    await saveChatTurn(tx, {
      conversationId: job.conversationId,
      jobId: job.id,
      historyHash: extendHash(asked, { role: "assistant", text: reply }),
      messageCount: conversation?.messageCount ?? 0,
      commitSha: workspace?.commitSha ?? null,
      bundle: workspace?.bundle ?? null,
    });
  });
}
