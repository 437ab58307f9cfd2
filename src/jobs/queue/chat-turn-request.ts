// What the web side records for a chat turn in its job row's context, read back by the worker.
import { z } from "zod";
import type { Job } from "../../store/jobs.ts";
import { imageMediaType } from "../../store/message-param.ts";
import { parseStored } from "../../store/stored-value.ts";

const chatTurnRequest = z.object({
  /** The model the client picked: "vmpilot" or "vmpilot/<owner>/<repo>" (stored as `agent`). */
  agent: z.string(),
  /** The repository's clone URL; null on scratch. */
  cloneUrl: z.string().nullable(),
  /** The client's system message, sanitized; "" when none. */
  system: z.string(),
  /** historyHash of the conversation up to and with this turn's user message, as the client sent it. */
  askedHash: z.string(),
  /**
   * Earlier messages vmpilot did not recognise (a conversation begun elsewhere), as context for
   * the first turn; "" otherwise.
   */
  transcript: z.string(),
  /** The user asked for a pull request (`/vmpilot pr`). */
  pullRequest: z.boolean(),
  /**
   * Asked with the operator's key (VMPILOT_API_KEY), which passes every gate; the requester
   * "operator" alone could be a GitHub login. Turns queued before it was recorded count as a
   * person's.
   */
  operator: z.boolean().default(false),
  /**
   * The images the new message carries, stored in conversation_images by the web side; they go
   * to the model after the message's text.
   */
  images: z.array(z.object({ mediaType: imageMediaType, sha256: z.string() })).default([]),
});

export type ChatTurnRequest = z.infer<typeof chatTurnRequest>;

export function readChatTurnRequest(job: Job): ChatTurnRequest {
  return parseStored(chatTurnRequest, job.context, `jobs.context of chat turn ${job.id}`);
}

/** The branch a chat-face conversation's workspace on a repository works on and pushes. */
export function chatBranch(conversationId: number): string {
  return `vmpilot/chat-${conversationId}`;
}
