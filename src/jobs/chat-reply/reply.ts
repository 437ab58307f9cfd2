// What a chat client is shown of a turn: markdown rendered from the turn's job-log events, one
// piece per event. The web process streams the pieces as the events arrive; the worker renders the
// same pieces at the end to remember the reply, so a client sending it back is recognised. Only a
// stream starts with the WORKING placeholder; the remembered reply, like a non-streamed one, is
// the answer alone (history-hash.ts treats the two as the same reply).
import { toolCallInput } from "../../agent/tool-call.ts";
import { insertedText } from "../../agent/tools/editor.ts";
import { type DiffLine, lineDiff } from "../../github/line-diff.ts";
import { codeBlock } from "../../github/markdown.ts";
import { formatCost } from "../../github/progress-comment.ts";
import { type JobEventKind, REPLY_END, readJobEvent } from "../../store/job-event-kinds.ts";
import { fenceLanguage } from "./language.ts";

export { REPLY_END };

/** A stream's first piece, sent before the turn has even been queued. */
export const WORKING = "_working…_\n\n";

// Outputs are shown with head and tail, like the model's view of them but shorter.
const OUTPUT_CAP = 6_000;

interface StoredEvent {
  type: string;
  data: Record<string, unknown>;
}

/** A code block, then the blank line that ends it as a piece of the reply. */
function fenced(text: string, language = ""): string {
  return `${codeBlock(text, language)}\n\n`;
}

function cut(text: string): string {
  if (text.length <= OUTPUT_CAP) return text;
  const half = OUTPUT_CAP / 2;
  const skipped = text.length - OUTPUT_CAP;
  return `${text.slice(0, half)}\n[… ${skipped} characters cut …]\n${text.slice(-half)}`;
}

function diff(path: string, before: string, after: string): string {
  const body = lineDiff(before, after)
    .map((line: DiffLine) =>
      line.kind === "…" ? `@@ ${line.skipped} unchanged lines @@` : `${line.kind}${line.text}`,
    )
    .join("\n");
  return fenced(`--- a/${path}\n+++ b/${path}\n${body}`, "diff");
}

function toolCall(name: string, input: unknown): string {
  const call = toolCallInput(name, input);
  if (call?.tool === "bash") {
    return call.restart ? "_restarted the shell_\n\n" : fenced(`$ ${call.command ?? ""}`, "bash");
  }
  if (call?.tool === "editor") {
    switch (call.command) {
      case "create":
        return diff(call.path, "", call.file_text ?? "");
      case "str_replace":
        return diff(call.path, call.old_str ?? "", call.new_str ?? "");
      case "insert":
        return diff(call.path, "", insertedText(call) ?? "");
      default:
        return "";
    }
  }
  return `_${name}_\n\n`;
}

function ending(end: Extract<JobEventKind, { type: typeof REPLY_END }>["data"]): string {
  const lines: string[] = [];
  if (end.error !== undefined) lines.push(`**Failed:** ${end.error}`);
  else if (end.detail) lines.push(`_${end.detail}_`);
  if (end.pullRequestUrl !== undefined) lines.push(`Draft pull request: ${end.pullRequestUrl}`);
  if (end.tests !== undefined) lines.push(`Tests: ${end.tests}`);
  const tokens = `${end.usage.inputTokens} in, ${end.usage.outputTokens} out`;
  lines.push(`Tokens: ${tokens} · cost ${formatCost(end.costUsd, end.priceKnown)}`);
  return `---\n${lines.join("  \n")}\n`;
}

/** The markdown a parsed event adds to the reply; empty for events the client need not see. */
export function pieceOf(event: JobEventKind): string {
  switch (event.type) {
    case "text":
      return `${event.data.text.trim()}\n\n`;
    case "tool_call":
      return toolCall(event.data.name, event.data.input);
    case "tool_result": {
      const { name, isError } = event.data;
      if (name !== "bash" && !isError) return "";
      const output = cut(event.data.output);
      if (name !== "bash") return fenced(output, "text");
      // A failed command's output ends with its exit code already.
      return `${fenced(output, fenceLanguage(output))}${isError ? "" : "_exit 0_\n\n"}`;
    }
    case REPLY_END:
      return ending(event.data);
    default:
      return "";
  }
}

/** The markdown a stored event adds to the reply. */
export function replyPiece(event: StoredEvent): string {
  return pieceOf(readJobEvent(event));
}

/** The whole reply of a turn from its events, up to the end marker. */
export function renderReply(events: readonly StoredEvent[]): string {
  let reply = "";
  for (const event of events) {
    // The end marker is read as one whatever its fields hold, so its stored type is enough here.
    reply += replyPiece(event);
    if (event.type === REPLY_END) break;
  }
  return reply;
}
