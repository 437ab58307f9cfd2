// A chat client sends the whole conversation with every request. Its hash, taken the same way on
// the worker when a turn ends and on the web side when the next request comes, finds the turn. The
// hash is a chain, so the worker extends the request's hash by the turn without the history.
import { createHash } from "node:crypto";
import { WORKING } from "./reply.ts";

export interface ClientMessage {
  role: "user" | "assistant";
  text: string;
}

/** Whitespace differs between clients (trimmed replies, CRLF); the words do not. */
function normal(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

const PLACEHOLDER = normal(WORKING);

/**
 * A streamed reply comes back beginning with the placeholder; a non-streamed one and the stored one
 * do not. Replies hash as if they began with it, so both match, and so do hashes stored when every
 * reply began with it.
 */
function canonical(message: ClientMessage): string {
  const words = normal(message.text);
  if (message.role === "user" || words.startsWith(PLACEHOLDER)) return words;
  return normal(`${WORKING}${words}`);
}

export function extendHash(hash: string, message: ClientMessage): string {
  return createHash("sha256")
    .update(`${hash}\0${message.role}\0${canonical(message)}`)
    .digest("hex");
}
