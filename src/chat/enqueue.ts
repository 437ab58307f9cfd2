// A chat turn becomes a job on the queue, the row, its images and the queue entry in one
// transaction. The images name the job, so that they go with it if it never runs (server.ts).

import type { FetchedImage } from "../github/images.ts";
import type { ChatTurnRequest } from "../jobs/queue/chat-turn-request.ts";
import type { Queue } from "../jobs/queue/queue.ts";
import { lockOwnerImages, sha256Hex, storeImage } from "../store/conversation-images.ts";
import { conversationKey } from "../store/conversations.ts";
import type { Database } from "../store/database.ts";
import { insertJob, type Job } from "../store/jobs.ts";
import { withTransaction } from "../store/sql.ts";
import { loginOf, type Principal } from "./auth.ts";
import type { PlannedTurn } from "./conversation.ts";
import { checkImageRoom, deleteExpiredImages } from "./image-limits.ts";
import type { ChatModel } from "./models.ts";

export async function enqueueTurn(
  db: Database,
  queue: Pick<Queue, "enqueueJob" | "wake">,
  input: {
    who: Principal;
    chatModel: ChatModel;
    plan: PlannedTurn;
    cloneUrl: string | null;
    /** The new message's images, read and checked (images.ts). */
    images: readonly FetchedImage[];
  },
): Promise<Job> {
  const { who, chatModel, plan } = input;
  const context: Omit<ChatTurnRequest, "images"> = {
    agent: chatModel.id,
    cloneUrl: input.cloneUrl,
    system: plan.system,
    askedHash: plan.askedHash,
    transcript: plan.transcript,
    pullRequest: plan.pullRequest,
    operator: who.kind === "operator",
  };
  // Stored once per conversation by hash, like an issue's; the job names them.
  const images: ChatTurnRequest["images"] = input.images.map(({ mediaType, data }) => ({
    mediaType,
    sha256: sha256Hex(data),
  }));
  const job = await withTransaction(db.pool, async (client) => {
    if (images.length > 0) {
      // One owner's requests count their images one at a time, so together they cannot pass the caps.
      await lockOwnerImages(client, who);
      await deleteExpiredImages(client);
      const hashes = images.map((image) => image.sha256);
      await checkImageRoom(client, who, hashes, plan.conversation.id);
    }
    const inserted = await insertJob(client, {
      conversationId: plan.conversation.id,
      installationId: chatModel.repository?.installationId ?? null,
      repositoryId: chatModel.repository?.id ?? null,
      repo: chatModel.repository?.fullName ?? "scratch",
      number: null,
      trigger: "chat",
      // To show, and for the worker's gate; whose the turn is, is its conversation's owner.
      requester: loginOf(who),
      instruction: plan.instruction,
      context: { ...context, images },
    });
    for (const { mediaType, data } of input.images) {
      await storeImage(client, plan.conversation.id, mediaType, data, inserted.id);
    }
    await queue.enqueueJob(client, {
      jobId: inserted.id,
      conversationKey: conversationKey(plan.conversation.id),
    });
    return inserted;
  });
  queue.wake();
  return job;
}
