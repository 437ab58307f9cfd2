import Anthropic from "@anthropic-ai/sdk";
import type { FailureCode } from "./events.ts";

export interface DescribedError {
  code: FailureCode;
  message: string;
}

/** A run failure the loop itself detects (as opposed to an API error). */
export class AgentFailure extends Error {
  constructor(
    readonly code: FailureCode,
    message: string,
  ) {
    super(message);
    this.name = "AgentFailure";
  }
}

/** Turns what the SDK threw into one clear line, after the SDK's own retries ran out. */
export function describeError(error: unknown, retries: number): DescribedError {
  if (error instanceof AgentFailure) return { code: error.code, message: error.message };
  const after = `after ${retries} ${retries === 1 ? "retry" : "retries"}`;
  if (error instanceof Anthropic.APIConnectionError) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
    return {
      code: "api_connection",
      message: `Could not reach the Anthropic API ${after}${cause}`,
    };
  }
  if (error instanceof Anthropic.APIError) {
    const detail = error.apiMessage ?? error.message;
    if (error.status === undefined) {
      // An `error` event in the middle of a stream: the SDK does not retry those.
      const code = error.type === "overloaded_error" ? "api_overloaded" : "api_server_error";
      return {
        code,
        message: `Anthropic API error during streaming (${error.type ?? "unknown"}) ${after}: ${detail}`,
      };
    }
    if (error.status === 529) {
      return {
        code: "api_overloaded",
        message: `Anthropic API overloaded (529) ${after}: ${detail}`,
      };
    }
    if (error.status === 429) {
      return {
        code: "api_rate_limited",
        message: `Anthropic API rate limit (429) ${after}: ${detail}`,
      };
    }
    if (error.status >= 500) {
      return {
        code: "api_server_error",
        message: `Anthropic API server error (${error.status}) ${after}: ${detail}`,
      };
    }
    if (error.status === 401 || error.status === 403) {
      return {
        code: "api_auth",
        message: `Anthropic API refused the credentials (${error.status}): ${detail}. Check ANTHROPIC_API_KEY.`,
      };
    }
    return {
      code: "api_request",
      message: `Anthropic API rejected the request (${error.status}): ${detail}`,
    };
  }
  return { code: "internal", message: error instanceof Error ? error.message : String(error) };
}

/** Errors worth retrying ourselves: the SDK retries HTTP statuses, but not a failure mid-stream. */
export function isRetryableStreamError(error: unknown): boolean {
  return (
    error instanceof Anthropic.APIError &&
    !(error instanceof Anthropic.APIUserAbortError) &&
    error.status === undefined &&
    (error.type === "overloaded_error" || error.type === "api_error")
  );
}
