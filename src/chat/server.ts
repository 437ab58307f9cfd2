// The chat face: OpenAI's `/v1/models` and `/v1/chat/completions`, served by the web role. A turn
// runs as a job on a worker; this process relays its job log to the client.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ProbotOctokit } from "probot";
import type { RepoSettings } from "../config/repo-config.ts";
import type { ImageFetchOptions } from "../github/images.ts";
import { TtlCache } from "../http/cache.ts";
import { readCapped } from "../http/capped-body.ts";
import type { Queue } from "../jobs/queue/queue.ts";
import type { Logger } from "../log/logger.ts";
import { dropTurnImages } from "../store/conversation-images.ts";
import type { Database } from "../store/database.ts";
import type { Job } from "../store/jobs.ts";
import { authenticate, type Principal } from "./auth.ts";
import { type CompletionRequest, parseCompletionRequest } from "./body.ts";
import { checkBudget } from "./budget.ts";
import { answerClientTask } from "./client-tasks.ts";
import { askedImages, planTurn } from "./conversation.ts";
import { enqueueTurn } from "./enqueue.ts";
import { ApiError, sendApiError } from "./errors.ts";
import { checkImageRoom, ImageReading } from "./image-limits.ts";
import { checkImageCount, readRequestImages } from "./images.ts";
import {
  type ChatModel,
  FOR_LISTING_MS,
  listModels,
  type ModelAccess,
  resolveModel,
} from "./models.ts";
import { CallBudget, PermitCache } from "./permits.ts";
import { takeRequest } from "./rate-limit.ts";
import {
  type Completion,
  chunk,
  relayTurn,
  sendCompletion,
  startStream,
  writeData,
} from "./relay.ts";

/** A conversation with its tool output fits well within this; more is refused unread. */
const MAX_BODY_BYTES = 8 * 1024 * 1024;

export interface ChatFaceDeps {
  db: Database;
  queue: Pick<Queue, "enqueueJob" | "wake" | "cancel">;
  /** VMPILOT_API_KEY: valid for scratch and every repository; unset, only personal keys work. */
  operatorKey?: string;
  /** An installation's client; without an id, the app's own (a JWT). */
  auth(installationId?: number): Promise<ProbotOctokit>;
  allowedUsers: readonly string[];
  /** Where a worker clones a repository from, by its full name. */
  cloneUrl(fullName: string): string;
  defaults: RepoSettings;
  /** Requests per key per minute; default 60. */
  ratePerMinute?: number;
  /** CLIENT_ADDRESS_HEADER: where a trusted proxy puts the client's address. */
  clientAddressHeader?: string;
  /** Questions this process asks GitHub per person per minute to decide who may use what; default 100. */
  githubCallsPerMinute?: number;
  /** How often a relay looks for new events; default 20 ms (one indexed read per open reply). */
  pollIntervalMs?: number;
  /** How images given by URL are fetched; default https to public addresses (tests: loopback). */
  imageFetch?: ImageFetchOptions;
  logger: Logger;
}

export interface ChatFace {
  handler(req: IncomingMessage, res: ServerResponse): Promise<boolean>;
  /** Ends open streams, so the HTTP server can close. */
  close(): void;
}

const NO_USAGE = {
  prompt_tokens: 0,
  completion_tokens: 0,
  total_tokens: 0,
  prompt_tokens_details: { cached_tokens: 0 },
  cost: 0,
};

/** A reply that needs no agent, in the format the request asked for. */
function answerAtOnce(
  res: ServerResponse,
  request: CompletionRequest,
  model: string,
  content: string,
): void {
  const completion: Completion = {
    id: `chatcmpl-${randomUUID()}`,
    model,
    created: Math.floor(Date.now() / 1000),
  };
  if (request.stream === true) {
    startStream(res, completion, content);
    writeData(res, chunk(completion, {}, "stop"));
    if (request.stream_options?.include_usage) {
      writeData(res, { ...chunk(completion, {}, null), choices: [], usage: NO_USAGE });
    }
    res.end("data: [DONE]\n\n");
    return;
  }
  sendCompletion(res, completion, content, NO_USAGE);
}

export function mountChatFace(deps: ChatFaceDeps): ChatFace {
  const perMinute = deps.ratePerMinute ?? 60;
  const open = new Set<ServerResponse>();
  const access: ModelAccess = {
    db: deps.db.pool,
    auth: deps.auth,
    allowedUsers: deps.allowedUsers,
    defaults: deps.defaults,
    permits: new PermitCache(FOR_LISTING_MS),
    logins: new TtlCache<string | null>(10 * 60_000, 10_000),
    budget: new CallBudget(deps.githubCallsPerMinute ?? 100),
    logger: deps.logger,
  };
  const reading = new ImageReading();

  async function models(req: IncomingMessage, res: ServerResponse) {
    const who = await authenticate(req, deps.db.pool, deps.operatorKey, deps.clientAddressHeader);
    await takeRequest(deps.db.pool, who, perMinute);
    const models = await listModels(access, who);
    const data = models.map((a) => ({
      id: a.id,
      object: "model",
      created: 0,
      owned_by: "vmpilot",
    }));
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ object: "list", data }));
  }

  async function completions(req: IncomingMessage, res: ServerResponse) {
    const key = await authenticate(req, deps.db.pool, deps.operatorKey, deps.clientAddressHeader);
    await takeRequest(deps.db.pool, key, perMinute);
    const declared = Number(req.headers["content-length"] ?? 0);
    const raw = declared > MAX_BODY_BYTES ? undefined : await readCapped(req, MAX_BODY_BYTES);
    if (raw === undefined) {
      throw new ApiError(
        413,
        "invalid_request_error",
        "request_too_large",
        "The request body is over 8 MB.",
      );
    }
    const request = parseCompletionRequest(raw.toString("utf8"));
    // The login GitHub gives the key's owner now, which the worker asks about again.
    const { chatModel, who } = await resolveModel(access, key, request.model);
    const chore = answerClientTask(request);
    if (chore !== undefined) {
      answerAtOnce(res, request, chatModel.id, chore);
      return;
    }
    await checkBudget(deps.db.pool, deps.defaults, who, chatModel);
    // From here the client's going stops the work: the images' reading, the turn.
    const gone = new AbortController();
    const onClose = () => {
      if (!res.writableFinished) gone.abort();
    };
    res.once("close", onClose);
    try {
      const job = await queueTurn(req, request, who, chatModel, gone.signal);
      if (!job) return;
      await relay(res, request, chatModel, job, gone.signal);
    } finally {
      res.off("close", onClose);
    }
  }

  /** The turn on the queue with its images; undefined when the client went away first. */
  async function queueTurn(
    req: IncomingMessage,
    request: CompletionRequest,
    who: Principal,
    chatModel: ChatModel,
    signal: AbortSignal,
  ): Promise<Job | undefined> {
    const urls = askedImages(request);
    checkImageCount(urls);
    // Only images given by URL take memory beyond the body while they are read.
    const release = reading.take(who, urls.filter((url) => !/^data:/i.test(url)).length);
    try {
      await checkImageRoom(deps.db.pool, who, urls);
      const images = await readRequestImages(urls, { ...deps.imageFetch, signal });
      const header = req.headers["x-openwebui-chat-id"];
      const clientConversationId =
        request.chat_id ?? (typeof header === "string" ? header.slice(0, 200) : null);
      const plan = await planTurn(
        deps.db.pool,
        who,
        chatModel,
        request,
        clientConversationId || null,
      );
      if (signal.aborted) return undefined;
      return await enqueueTurn(deps.db, deps.queue, {
        who,
        chatModel,
        plan,
        cloneUrl: chatModel.repository ? deps.cloneUrl(chatModel.repository.fullName) : null,
        images,
      });
    } finally {
      release();
    }
  }

  /** The turn's reply, as the client asked for it; a client that goes stops the turn. */
  async function relay(
    res: ServerResponse,
    request: CompletionRequest,
    chatModel: ChatModel,
    job: Job,
    signal: AbortSignal,
  ) {
    const completion: Completion = {
      id: `chatcmpl-${randomUUID()}`,
      model: chatModel.id,
      created: Math.floor(Date.now() / 1000),
    };
    const stream = request.stream === true;
    if (stream) startStream(res, completion);
    open.add(res);
    let text = "";
    try {
      const usage = await relayTurn({
        db: deps.db.pool,
        jobId: job.id,
        pollMs: deps.pollIntervalMs ?? 20,
        signal,
        onPiece: (piece) => {
          text += piece;
          if (stream) writeData(res, chunk(completion, { content: piece }, null));
        },
      });
      if (usage === null) {
        // The client went away: stop the turn; the conversation stays, at its last finished turn.
        // A turn that never started cost nothing, and keeps nothing: its images go with it.
        if ((await deps.queue.cancel(job.id)) === "cancelled") {
          await dropTurnImages(deps.db.pool, job.conversationId, job.id);
        }
        return;
      }
      if (stream) {
        writeData(res, chunk(completion, {}, "stop"));
        if (request.stream_options?.include_usage) {
          writeData(res, { ...chunk(completion, {}, null), choices: [], usage });
        }
        res.end("data: [DONE]\n\n");
        return;
      }
      sendCompletion(res, completion, text, usage);
    } finally {
      open.delete(res);
    }
  }

  return {
    async handler(req, res) {
      const path = new URL(req.url ?? "/", "http://chat.invalid").pathname;
      const route =
        path === "/v1/models" && req.method === "GET"
          ? models
          : path === "/v1/chat/completions" && req.method === "POST"
            ? completions
            : undefined;
      if (!route) {
        if (!path.startsWith("/v1/")) return false;
        sendApiError(
          res,
          new ApiError(
            404,
            "invalid_request_error",
            "unknown_url",
            `Unknown request URL: ${req.method} ${path}.`,
          ),
        );
        return true;
      }
      try {
        await route(req, res);
      } catch (error) {
        if (res.headersSent) {
          res.end();
        } else if (error instanceof ApiError) {
          sendApiError(res, error);
        } else {
          const requestId = randomUUID();
          deps.logger.error({ err: error, requestId, path }, "chat request failed");
          sendApiError(
            res,
            new ApiError(
              500,
              "server_error",
              null,
              `The server had an error processing the request (request id ${requestId}).`,
              { "x-request-id": requestId },
            ),
          );
        }
      }
      return true;
    },
    close() {
      for (const res of open) res.destroy();
      open.clear();
    },
  };
}
