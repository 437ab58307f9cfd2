import Anthropic from "@anthropic-ai/sdk";
import { afterRetries, type DescribedError } from "../errors.ts";

/** One clear line for what the Anthropic SDK threw, after its own retries ran out. */
export function describeAnthropicError(
  error: unknown,
  retries: number,
): DescribedError | undefined {
  const after = afterRetries(retries);
  if (error instanceof Anthropic.APIConnectionError) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
    return {
      code: "api_connection",
      message: `Could not reach the Anthropic API ${after}${cause}`,
    };
  }
  if (!(error instanceof Anthropic.APIError)) return undefined;
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

/** Errors worth retrying ourselves: the SDK retries HTTP statuses, but not a failure mid-stream. */
export function isRetryableStreamError(error: unknown): boolean {
  return (
    error instanceof Anthropic.APIError &&
    !(error instanceof Anthropic.APIUserAbortError) &&
    error.status === undefined &&
    (error.type === "overloaded_error" || error.type === "api_error")
  );
}
