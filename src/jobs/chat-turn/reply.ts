// What a chat client is shown of a turn: markdown rendered from the turn's session-log events, one
// piece per event. The web process streams the pieces as the events arrive; the worker renders the
// same pieces at the end to remember the reply, so a client sending it back is recognised. Only a
// stream starts with the WORKING placeholder; the remembered reply, like a non-streamed one, is
// the answer alone (history-hash.ts treats the two as the same reply).
import { type DiffLine, lineDiff } from "../../github/line-diff.ts";
import { formatCost } from "../../github/progress-comment.ts";
import { fenceLanguage } from "./language.ts";

/** A stream's first piece, sent before the turn has even been queued. */
export const WORKING = "_working…_\n\n";
/** The event that ends a turn's reply; nothing after it is part of the reply. */
export const REPLY_END = "chat_reply_end";

// Outputs are shown with head and tail, like the model's view of them but shorter.
const OUTPUT_CAP = 6_000;

interface EventLike {
  type: string;
  data: Record<string, unknown>;
}

/** A fence longer than any backtick run inside, so output cannot close it early. */
function fenced(text: string, language = ""): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = "`".repeat(longest + 1);
  return `${fence}${language}\n${text.replace(/\n$/, "")}\n${fence}\n\n`;
}

function cut(text: string): string {
  if (text.length <= OUTPUT_CAP) return text;
  const half = OUTPUT_CAP / 2;
  const skipped = text.length - OUTPUT_CAP;
  return `${text.slice(0, half)}\n[… ${skipped} characters cut …]\n${text.slice(-half)}`;
}

const str = (value: unknown) => (typeof value === "string" ? value : "");

function diff(path: string, before: string, after: string): string {
  const body = lineDiff(before, after)
    .map((line: DiffLine) =>
      line.kind === "…" ? `@@ ${line.skipped} unchanged lines @@` : `${line.kind}${line.text}`,
    )
    .join("\n");
  return fenced(`--- a/${path}\n+++ b/${path}\n${body}`, "diff");
}

function toolCall(name: string, input: Record<string, unknown>): string {
  if (name === "bash") {
    return input.restart ? "_restarted the shell_\n\n" : fenced(`$ ${str(input.command)}`, "bash");
  }
  if (name === "str_replace_based_edit_tool") {
    const path = str(input.path);
    switch (input.command) {
      case "create":
        return diff(path, "", str(input.file_text));
      case "str_replace":
        return diff(path, str(input.old_str), str(input.new_str));
      case "insert":
        return diff(path, "", str(input.insert_text ?? input.new_str));
      default:
        return "";
    }
  }
  return `_${name}_\n\n`;
}

function ending(d: Record<string, unknown>): string {
  const lines: string[] = [];
  if (typeof d.error === "string") lines.push(`**Failed:** ${d.error}`);
  else if (typeof d.detail === "string" && d.detail) lines.push(`_${d.detail}_`);
  if (typeof d.pullRequestUrl === "string") lines.push(`Draft pull request: ${d.pullRequestUrl}`);
  if (typeof d.tests === "string") lines.push(`Tests: ${d.tests}`);
  const usage = (d.usage ?? {}) as Record<string, unknown>;
  const tokens = `${Number(usage.inputTokens ?? 0)} in, ${Number(usage.outputTokens ?? 0)} out`;
  lines.push(
    `Tokens: ${tokens} · cost ${formatCost(Number(d.costUsd ?? 0), d.priceKnown !== false)}`,
  );
  return `---\n${lines.join("  \n")}\n`;
}

/** The markdown an event adds to the reply; empty for events the client need not see. */
export function replyPiece(event: EventLike): string {
  const d = event.data;
  switch (event.type) {
    case "text":
      return `${str(d.text).trim()}\n\n`;
    case "tool_call":
      return toolCall(str(d.name), (d.input ?? {}) as Record<string, unknown>);
    case "tool_result": {
      if (d.name !== "bash" && !d.isError) return "";
      const output = cut(str(d.output));
      if (d.name !== "bash") return fenced(output, "text");
      // A failed command's output ends with its exit code already.
      return `${fenced(output, fenceLanguage(output))}${d.isError ? "" : "_exit 0_\n\n"}`;
    }
    case REPLY_END:
      return ending(d);
    default:
      return "";
  }
}

/** The whole reply of a turn from its events, up to the end marker. */
export function renderReply(events: readonly EventLike[]): string {
  let reply = "";
  for (const event of events) {
    reply += replyPiece(event);
    if (event.type === REPLY_END) break;
  }
  return reply;
}
