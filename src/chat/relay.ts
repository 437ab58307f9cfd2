// A turn's job-log events, relayed to the client as they are stored: OpenAI's streamed chunks
// (`chat.completion.chunk`, then `[DONE]`), or one `chat.completion` at the end.
import type { ServerResponse } from "node:http";
import { pieceOf, WORKING } from "../jobs/chat-reply/reply.ts";
import {
  REPLY_END,
  readJobEvent,
  type StoredUsage,
  storedUsage,
} from "../store/job-event-kinds.ts";
import { jobEventMark, waitForJobEvent } from "../store/job-event-signal.ts";
import { listJobEvents } from "../store/job-events.ts";
import { getJob } from "../store/jobs.ts";
import type { Queryable } from "../store/sql.ts";

export interface Completion {
  id: string;
  model: string;
  created: number;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** The prompt tokens read from the model's prompt cache. */
  prompt_tokens_details: { cached_tokens: number };
  /**
   * What the turn cost, in US dollars, as vmpilot counts it (OpenRouter's field for the same):
   * every request of the turn's agent, an estimate when the model's price is unknown.
   */
  cost: number;
}

function usageOf(u: StoredUsage, costUsd: number): Usage {
  const cached = u.cacheReadInputTokens;
  const prompt = u.inputTokens + cached + u.cacheCreationInputTokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: u.outputTokens,
    total_tokens: prompt + u.outputTokens,
    prompt_tokens_details: { cached_tokens: cached },
    cost: costUsd,
  };
}

export function chunk(c: Completion, delta: Record<string, unknown>, finish: string | null) {
  return {
    id: c.id,
    object: "chat.completion.chunk",
    created: c.created,
    model: c.model,
    system_fingerprint: null,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
  };
}

export function writeData(res: ServerResponse, data: unknown): void {
  if (!res.writableEnded) res.write(`data: ${JSON.stringify(data)}\n\n`);
}

/** The role chunk and the first text (the "working…" line): what a streaming client gets at once. */
export function startStream(res: ServerResponse, c: Completion, first = WORKING): void {
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-store",
    "x-accel-buffering": "no",
  });
  writeData(res, chunk(c, { role: "assistant", content: "" }, null));
  writeData(res, chunk(c, { content: first }, null));
}

/** A whole `chat.completion`, for a request that did not ask for a stream. */
export function sendCompletion(
  res: ServerResponse,
  c: Completion,
  content: string,
  usage: Usage,
): void {
  res.writeHead(200, { "content-type": "application/json" });
  res.end(
    JSON.stringify({
      id: c.id,
      object: "chat.completion",
      created: c.created,
      model: c.model,
      system_fingerprint: null,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content, refusal: null },
          logprobs: null,
          finish_reason: "stop",
        },
      ],
      usage,
    }),
  );
}

export interface RelayOptions {
  db: Queryable;
  jobId: number;
  pollMs: number;
  /** Called with each piece of the reply. */
  onPiece(text: string): void;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

/** Relays until the turn's reply ends; resolves to its usage (null when the client left first). */
export async function relayTurn(options: RelayOptions): Promise<Usage | null> {
  let after = 0;
  let finished = false;
  // Woken at once by events this process stores; otherwise polled, quick while events flow and
  // slower (up to 5×) through a long model call or command.
  let wait = options.pollMs;
  while (!options.signal.aborted) {
    const mark = jobEventMark();
    const events = await listJobEvents(options.db, options.jobId, after, 200);
    for (const event of events) {
      after = event.id;
      const kind = readJobEvent(event);
      const piece = pieceOf(kind);
      if (piece) options.onPiece(piece);
      if (kind.type === REPLY_END) return usageOf(kind.data.usage, kind.data.costUsd);
    }
    if (events.length > 0) {
      wait = options.pollMs;
      continue;
    }
    if (finished) {
      // Cancelled or dead before it could write its ending.
      const job = await getJob(options.db, options.jobId);
      options.onPiece(`---\n**Stopped:** the turn ended (${job?.status ?? "gone"}).\n`);
      return usageOf(storedUsage(job?.usage), job?.costUsd ?? 0);
    }
    // The status only when idle, and one more read after it: events stored before the job
    // finished are then certain to be seen.
    const job = await getJob(options.db, options.jobId);
    finished = !job || job.finishedAt !== null;
    if (!finished) {
      await waitForJobEvent(options.jobId, mark, wait, options.signal);
      wait = Math.min(wait * 1.5, options.pollMs * 5);
    }
  }
  return null;
}
