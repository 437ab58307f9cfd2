import { describe, expect, it } from "vitest";
import type { AgentEvent } from "../../src/agent/events.ts";
import { emptyUsage } from "../../src/agent/usage.ts";
import { createProgressPrinter } from "../../src/cli/progress.ts";

const events: AgentEvent[] = [
  { type: "step_started", step: 1 },
  { type: "tool_call", step: 1, id: "t1", name: "bash", input: { command: "npm test" } },
  {
    type: "usage",
    step: 1,
    turn: emptyUsage(),
    totals: { ...emptyUsage(), costUsd: 0.0123 },
    priceKnown: true,
  },
];

function capture(isTTY: boolean) {
  let written = "";
  const printer = createProgressPrinter({ isTTY, write: (text: string) => (written += text) });
  for (const event of events) printer.onEvent(event);
  printer.close();
  return written;
}

describe("progress printer", () => {
  it("prints one plain line per event when not on a terminal", () => {
    expect(capture(false)).toBe("step 1\n  → bash: npm test\n  cost so far $0.0123\n");
  });

  it("redraws a live step and cost line on a terminal and clears it at the end", () => {
    const out = capture(true);
    expect(out).toContain("⏳ step 1 · $0.0123 · bash: npm test");
    expect(out).toContain("  → bash: npm test\n");
    expect(out.endsWith("\r\x1b[2K")).toBe(true);
  });
});
