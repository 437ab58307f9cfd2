// The session log: one list item per job event. The live stream sends the same items, so a page
// built at once and a page grown event by event look alike.

import { lineDiff } from "../github/line-diff.ts";
import { redact } from "../log/redact.ts";
import type { JobEvent } from "../store/job-events.ts";
import { type Html, html } from "./html.ts";

// Outputs past this are cut on the page; the model saw at most 30,000 characters anyway.
const MAX_OUTPUT = 100_000;

export function renderEvent(event: JobEvent): Html {
  const d = event.data;
  const id = `ev-${event.id}`;
  const time = html`<time datetime="${event.at.toISOString()}">${clock(event.at)}</time>`;
  switch (event.type) {
    case "step_started":
      return html`<li id="${id}" class="step"><h3>Step ${num(d.step)}</h3></li>`;
    case "text":
      return html`<li id="${id}" class="text">${time}<div class="model-text">${clean(d.text)}</div></li>`;
    case "tool_call":
      return html`<li id="${id}" class="tool-call">${time} ${renderToolCall(str(d.name), d.input)}</li>`;
    case "tool_result":
      return renderToolResult(id, d);
    case "usage":
      return html`<li id="${id}" class="usage muted">${usageLine(d.turn, d.totals)}</li>`;
    case "compacted":
      return html`<li id="${id}" class="muted">${time} Context compacted: ${num(d.clearedToolResults)} old
        tool results cleared, ${num(d.summarizedMessages)} messages summarised
        (${num(d.tokensBefore)} → about ${num(d.tokensAfter)} tokens).</li>`;
    case "finished":
      return html`<li id="${id}" class="finished">${time} <strong>Finished</strong> (${str(d.reason)})
        after ${num(d.steps)} steps. ${clean(d.detail)}
        ${d.finalText ? html`<div class="model-text">${clean(d.finalText)}</div>` : ""}</li>`;
    case "failed":
      return html`<li id="${id}" class="failed">${time} <strong>Failed</strong> (${str(d.code)}):
        ${clean(d.error)}</li>`;
    default:
      return renderOther(id, time, event);
  }
}

function renderToolCall(name: string, input: unknown): Html {
  const i = (input ?? {}) as Record<string, unknown>;
  if (name === "bash") {
    if (i.restart) return html`<span class="muted">Restarted the shell</span>`;
    return html`<pre class="command"><span aria-hidden="true">$ </span>${clean(i.command)}</pre>`;
  }
  if (name === "str_replace_based_edit_tool" || name === "str_replace_editor") {
    const path = html`<code>${clean(i.path)}</code>`;
    switch (i.command) {
      case "view":
        return html`Viewed ${path}`;
      case "create":
        return html`Created ${path}${diffBlock("", str(i.file_text))}`;
      case "str_replace":
        return html`Edited ${path}${diffBlock(str(i.old_str), str(i.new_str))}`;
      case "insert":
        return html`Inserted into ${path} after line ${num(i.insert_line)}${diffBlock("", str(i.insert_text ?? i.new_str))}`;
      case "undo_edit":
        return html`Undid the last edit of ${path}`;
    }
  }
  return html`Called <code>${name}</code>
    <details><summary>Input</summary><pre>${clean(JSON.stringify(input, null, 2))}</pre></details>`;
}

function diffBlock(before: string, after: string): Html {
  const lines = lineDiff(redact(before), redact(after)).map((line) => {
    if (line.kind === "…") return html`<span class="skip">… ${line.skipped} unchanged lines</span>`;
    const cls = line.kind === "+" ? "add" : line.kind === "-" ? "del" : "same";
    return html`<span class="${cls}">${line.kind} ${line.text}</span>`;
  });
  return html`<pre class="diff" aria-label="Diff">${lines}</pre>`;
}

function renderToolResult(id: string, d: Record<string, unknown>): Html {
  let output = str(d.log ?? d.output);
  const cut = output.length > MAX_OUTPUT;
  if (cut) output = output.slice(0, MAX_OUTPUT);
  const lines = output ? output.split("\n").length : 0;
  const what = d.isError ? "Error from" : "Output of";
  const duration =
    typeof d.durationMs === "number" ? `, ${(d.durationMs / 1000).toFixed(1)} s` : "";
  return html`<li id="${id}" class="tool-result${d.isError ? " tool-error" : ""}">
<details><summary>${what} ${str(d.name)} (${lines} ${lines === 1 ? "line" : "lines"}${duration})</summary>
<pre>${redact(output)}${cut ? "\n… cut here on the page" : ""}</pre></details></li>`;
}

function renderOther(id: string, time: Html, event: JobEvent): Html {
  const { message, ...rest } = event.data;
  const details = Object.keys(rest).length
    ? html`<details><summary>Details</summary><pre>${clean(JSON.stringify(rest, null, 2))}</pre></details>`
    : "";
  return html`<li id="${id}" class="event">${time} <strong>${humanize(event.type)}</strong>${
    message !== undefined ? html`: ${clean(message)}` : ""
  }${details}</li>`;
}

function usageLine(turn: unknown, totals: unknown): string {
  const t = (turn ?? {}) as Record<string, unknown>;
  const all = (totals ?? {}) as Record<string, unknown>;
  const cache = Number(t.cacheReadInputTokens ?? 0) + Number(t.cacheCreationInputTokens ?? 0);
  return `Tokens: ${num(t.inputTokens)} in, ${num(t.outputTokens)} out, ${cache.toLocaleString("en-US")} cache · cost ${usd(t.costUsd)} (job so far ${usd(all.costUsd)})`;
}

export function usd(value: unknown): string {
  const n = Number(value ?? 0);
  return `$${n < 1 && n > 0 ? n.toFixed(4) : n.toFixed(2)}`;
}

function num(value: unknown): string {
  const n = Number(value);
  return Number.isFinite(n) ? n.toLocaleString("en-US") : "?";
}

function str(value: unknown): string {
  return typeof value === "string"
    ? value
    : value === undefined || value === null
      ? ""
      : String(value);
}

function clean(value: unknown): string {
  return redact(str(value));
}

function humanize(type: string): string {
  const words = type.replace(/[_-]+/g, " ").trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function clock(at: Date): string {
  return at.toISOString().slice(11, 19);
}
