// The job log: one list item per job event. The live stream sends the same items, so a page
// built at once and a page grown event by event look alike.

import { toolCallInput } from "../agent/tool-call.ts";
import { insertedText } from "../agent/tools/editor.ts";
import { lineDiff } from "../github/line-diff.ts";
import { redact } from "../log/redact.ts";
import {
  type JobEventKind,
  REPLY_END,
  readJobEvent,
  type StoredUsage,
} from "../store/job-event-kinds.ts";
import type { JobEvent } from "../store/job-events.ts";
import { type Html, html } from "./html.ts";

// Outputs past this are cut on the page; the model saw at most 30,000 characters anyway.
const MAX_OUTPUT = 100_000;

export function renderEvent(event: JobEvent): Html {
  const kind = readJobEvent(event);
  const id = `ev-${event.id}`;
  const time = html`<time datetime="${event.at.toISOString()}">${clock(event.at)}</time>`;
  switch (kind.type) {
    case "step_started":
      return html`<li id="${id}" class="step"><h3>Step ${num(kind.data.step)}</h3></li>`;
    case "text":
      return html`<li id="${id}" class="text">${time}<div class="model-text">${redact(kind.data.text)}</div></li>`;
    case "tool_call":
      return html`<li id="${id}" class="tool-call">${time} ${renderToolCall(kind.data.name, kind.data.input)}</li>`;
    case "tool_result":
      return renderToolResult(id, kind.data);
    case "usage":
      return html`<li id="${id}" class="usage muted">${usageLine(kind.data.request, kind.data.totals)}</li>`;
    case "compacted": {
      const d = kind.data;
      return html`<li id="${id}" class="muted">${time} Context compacted: ${num(d.clearedToolResults)} old
        tool results cleared, ${num(d.summarizedMessages)} messages summarised
        (${num(d.tokensBefore)} → about ${num(d.tokensAfter)} tokens).</li>`;
    }
    case "finished": {
      const d = kind.data;
      return html`<li id="${id}" class="finished">${time} <strong>Finished</strong> (${d.reason})
        after ${num(d.steps)} steps. ${redact(d.detail ?? "")}
        ${d.finalText ? html`<div class="model-text">${redact(d.finalText)}</div>` : ""}</li>`;
    }
    case "failed":
      return html`<li id="${id}" class="failed">${time} <strong>Failed</strong> (${kind.data.code}):
        ${redact(kind.data.error)}</li>`;
    case REPLY_END:
      // The reply's facts belong to the chat client; the log shows them as stored.
      return renderOther(id, time, event.type, undefined, event.data);
    case "other":
      return renderOther(id, time, kind.name, kind.message, kind.details);
  }
}

function renderToolCall(name: string, input: unknown): Html {
  const call = toolCallInput(name, input);
  if (call?.tool === "bash") {
    if (call.restart) return html`<span class="muted">Restarted the shell</span>`;
    return html`<pre class="command"><span aria-hidden="true">$ </span>${redact(call.command ?? "")}</pre>`;
  }
  if (call?.tool === "editor") {
    const path = html`<code>${redact(call.path)}</code>`;
    switch (call.command) {
      case "view":
        return html`Viewed ${path}`;
      case "create":
        return html`Created ${path}${diffBlock("", call.file_text ?? "")}`;
      case "str_replace":
        return html`Edited ${path}${diffBlock(call.old_str ?? "", call.new_str ?? "")}`;
      case "insert":
        return html`Inserted into ${path} after line ${num(call.insert_line ?? 0)}${diffBlock("", insertedText(call) ?? "")}`;
    }
  }
  return html`Called <code>${name}</code>
    <details><summary>Input</summary><pre>${redact(JSON.stringify(input, null, 2) ?? "")}</pre></details>`;
}

function diffBlock(before: string, after: string): Html {
  const lines = lineDiff(redact(before), redact(after)).map((line) => {
    if (line.kind === "…") return html`<span class="skip">… ${line.skipped} unchanged lines</span>`;
    const cls = line.kind === "+" ? "add" : line.kind === "-" ? "del" : "same";
    return html`<span class="${cls}">${line.kind} ${line.text}</span>`;
  });
  return html`<pre class="diff" aria-label="Diff">${lines}</pre>`;
}

type ToolResult = Extract<JobEventKind, { type: "tool_result" }>["data"];

function renderToolResult(id: string, d: ToolResult): Html {
  let output = d.log ?? d.output;
  const cut = output.length > MAX_OUTPUT;
  if (cut) output = output.slice(0, MAX_OUTPUT);
  const lines = output ? output.split("\n").length : 0;
  const what = d.isError ? "Error from" : "Output of";
  const duration = d.durationMs !== undefined ? `, ${(d.durationMs / 1000).toFixed(1)} s` : "";
  return html`<li id="${id}" class="tool-result${d.isError ? " tool-error" : ""}">
<details><summary>${what} ${d.name} (${lines} ${lines === 1 ? "line" : "lines"}${duration})</summary>
<pre>${redact(output)}${cut ? "\n… cut here on the page" : ""}</pre></details></li>`;
}

function renderOther(
  id: string,
  time: Html,
  name: string,
  message: string | undefined,
  details: Record<string, unknown>,
): Html {
  const more = Object.keys(details).length
    ? html`<details><summary>Details</summary><pre>${redact(JSON.stringify(details, null, 2))}</pre></details>`
    : "";
  return html`<li id="${id}" class="event">${time} <strong>${humanize(name)}</strong>${
    message !== undefined ? html`: ${redact(message)}` : ""
  }${more}</li>`;
}

function usageLine(request: StoredUsage, totals: StoredUsage): string {
  const cache = request.cacheReadInputTokens + request.cacheCreationInputTokens;
  return `Tokens: ${num(request.inputTokens)} in, ${num(request.outputTokens)} out, ${num(cache)} cache · cost ${usd(request.costUsd)} (job so far ${usd(totals.costUsd)})`;
}

export function usd(n: number): string {
  return `$${n < 1 && n > 0 ? n.toFixed(4) : n.toFixed(2)}`;
}

function num(n: number): string {
  return n.toLocaleString("en-US");
}

function humanize(type: string): string {
  const words = type.replace(/[_-]+/g, " ").trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function clock(at: Date): string {
  return at.toISOString().slice(11, 19);
}
