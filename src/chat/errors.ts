// Failures in OpenAI's error format, so clients show them as they show OpenAI's own.
import type { ServerResponse } from "node:http";

export class ApiError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string | null;
  readonly headers: Record<string, string>;
  constructor(
    status: number,
    type: string,
    code: string | null,
    message: string,
    headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = status;
    this.type = type;
    this.code = code;
    this.headers = headers;
    this.name = "ApiError";
  }

  get body() {
    return { error: { message: this.message, type: this.type, param: null, code: this.code } };
  }
}

export const badKey = () =>
  new ApiError(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.");

export const unknownModel = (model: string) =>
  new ApiError(
    404,
    "invalid_request_error",
    "model_not_found",
    `The model \`${model.slice(0, 200)}\` does not exist or you do not have access to it.`,
  );

export const badRequest = (message: string) =>
  new ApiError(400, "invalid_request_error", null, message);

export function sendApiError(res: ServerResponse, error: ApiError): void {
  res.writeHead(error.status, { "content-type": "application/json", ...error.headers });
  res.end(JSON.stringify(error.body));
}
