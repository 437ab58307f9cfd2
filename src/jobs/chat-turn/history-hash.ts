// A chat client sends the whole conversation with every request. Its hash, taken the same way on
// the worker when a turn ends and on the web side when the next request comes, finds the turn. The
// hash is a chain, so the worker extends the request's hash by the turn without the history.
import { createHash } from "node:crypto";

export interface ClientMessage {
  role: "user" | "assistant";
  text: string;
}

/** Whitespace differs between clients (trimmed replies, CRLF); the words do not. */
function normal(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

export function extendHash(hash: string, message: ClientMessage): string {
  return createHash("sha256")
    .update(`${hash}\0${message.role}\0${normal(message.text)}`)
    .digest("hex");
}
