import type { IncomingMessage, ServerResponse } from "node:http";
import { Html } from "./html.ts";

export const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "x-content-type-options": "nosniff",
  "cross-origin-opener-policy": "same-origin",
};

export class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** No session, or GitHub no longer accepts its token: sign in, then come back. */
export class SignInRequired extends Error {
  constructor() {
    super("sign-in required");
  }
}

export function send(
  res: ServerResponse,
  status: number,
  body: Html | string,
  headers: Record<string, string | string[]> = {},
): void {
  const isHtml = body instanceof Html;
  res.writeHead(status, {
    ...SECURITY_HEADERS,
    "content-type": isHtml ? "text/html; charset=utf-8" : "text/plain; charset=utf-8",
    "cache-control": "no-store",
    ...headers,
  });
  res.end(isHtml ? `<!doctype html>\n${body.value}` : body);
}

/** 303 so that a POST is followed by a GET. */
export function redirect(
  res: ServerResponse,
  location: string,
  headers: Record<string, string | string[]> = {},
): void {
  res.writeHead(303, { ...SECURITY_HEADERS, location, "cache-control": "no-store", ...headers });
  res.end();
}

export function parseCookies(req: IncomingMessage): Map<string, string> {
  const out = new Map<string, string>();
  for (const pair of (req.headers.cookie ?? "").split(";")) {
    const eq = pair.indexOf("=");
    if (eq < 1) continue;
    const name = pair.slice(0, eq).trim();
    if (!out.has(name)) out.set(name, pair.slice(eq + 1).trim());
  }
  return out;
}

export interface CookieOptions {
  maxAgeSeconds: number;
  secure: boolean;
  path?: string;
}

export function serializeCookie(name: string, value: string, options: CookieOptions): string {
  const parts = [
    `${name}=${value}`,
    `Path=${options.path ?? "/"}`,
    `Max-Age=${options.maxAgeSeconds}`,
    "HttpOnly",
    "SameSite=Lax",
  ];
  if (options.secure) parts.push("Secure");
  return parts.join("; ");
}

const FORM_LIMIT = 64 * 1024;

/** Reads an application/x-www-form-urlencoded body; anything else is refused. */
export async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/x-www-form-urlencoded") {
    throw new HttpError(415, "Forms must be sent as application/x-www-form-urlencoded.");
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > FORM_LIMIT) throw new HttpError(413, "Form too large.");
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}
