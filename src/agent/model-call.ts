import Anthropic from "@anthropic-ai/sdk";
import { isRetryableStreamError } from "./providers/anthropic-errors.ts";

export interface ClientOptions {
  /** Default: ANTHROPIC_API_KEY, as the SDK reads it. */
  apiKey?: string;
  /** Default: ANTHROPIC_BASE_URL, else the public API. */
  baseURL?: string;
  /** Retries for 408/409/429/5xx/529 and connection errors, done by the SDK; default 4. */
  maxRetries?: number;
  /** Per-request timeout in ms; the SDK's default when unset. */
  timeoutMs?: number;
}

const DEFAULT_MAX_RETRIES = 4;

export function createClient(options: ClientOptions = {}): Anthropic {
  return new Anthropic({
    apiKey: options.apiKey,
    baseURL: options.baseURL,
    maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
    ...(options.timeoutMs !== undefined && { timeout: options.timeoutMs }),
  });
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Retries for an error event in the middle of a stream, which the SDK does not retry. */
  streamRetries: number;
  /** First backoff for those retries; doubles each time. */
  retryDelayMs: number;
}

function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(new Anthropic.APIUserAbortError());
      },
      { once: true },
    );
  });
}

/** One streamed request, accumulated into the final message. */
export async function callModel(
  client: Anthropic,
  params: Anthropic.MessageStreamParams,
  options: CallOptions,
): Promise<Anthropic.Message> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await client.messages.stream(params, { signal: options.signal }).finalMessage();
    } catch (error) {
      if (attempt >= options.streamRetries || !isRetryableStreamError(error)) throw error;
      await delay(options.retryDelayMs * 2 ** attempt, options.signal);
    }
  }
}
