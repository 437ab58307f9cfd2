import type { AgentEvent } from "../agent/events.ts";
import { describeToolCall } from "../agent/tool-call.ts";
import { terminalText } from "./terminal-text.ts";

export interface ProgressOutput {
  write(text: string): unknown;
  isTTY?: boolean;
}

const LINE_LIMIT = 160;

/** One line of what the agent said or did, without terminal controls (see terminal-text.ts). */
function clip(text: string, limit = LINE_LIMIT): string {
  const line = terminalText(text).replace(/\s+/g, " ").trim();
  return line.length > limit ? `${line.slice(0, limit - 1)}…` : line;
}

export function formatUsd(usd: number): string {
  return `$${usd.toFixed(usd < 1 ? 4 : 2)}`;
}

/**
 * Prints agent events for a person. On a TTY a status line (step, cost, current activity) is
 * redrawn in place under the scrolling log; elsewhere every event is one plain line, so logs of
 * CI runs stay readable.
 */
export function createProgressPrinter(out: ProgressOutput) {
  const live = out.isTTY === true;
  let step = 0;
  let cost = 0;
  let activity = "starting";
  let statusShown = false;

  const clearStatus = () => {
    if (statusShown) out.write("\r\x1b[2K");
    statusShown = false;
  };
  const drawStatus = () => {
    if (!live) return;
    clearStatus();
    out.write(clip(`⏳ step ${step} · ${formatUsd(cost)} · ${activity}`, 120));
    statusShown = true;
  };
  const log = (line: string) => {
    clearStatus();
    out.write(`${line}\n`);
    drawStatus();
  };

  return {
    onEvent(event: AgentEvent): void {
      switch (event.type) {
        case "step_started":
          step = event.step;
          if (live) drawStatus();
          else log(`step ${step}`);
          break;
        case "tool_call":
          activity = clip(describeToolCall(event.name, event.input), 100);
          log(`  → ${clip(describeToolCall(event.name, event.input))}`);
          break;
        case "tool_result":
          if (event.isError) log(`  ✗ ${event.name}: ${clip(event.output, 120)}`);
          break;
        case "text":
          log(clip(event.text, 400));
          break;
        case "usage":
          cost = event.totals.costUsd;
          if (live) drawStatus();
          else log(`  cost so far ${formatUsd(cost)}`);
          break;
        case "compacted":
          log(`  context compacted: ${event.tokensBefore} → ~${event.tokensAfter} tokens`);
          break;
        case "finished":
        case "failed":
          clearStatus();
          break;
      }
    },
    /** Leaves the terminal on a clean line. */
    close(): void {
      clearStatus();
    },
  };
}
