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
    request: emptyUsage(),
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
    expect(capture(false)).toBe("step 1\n  → $ npm test\n  cost so far $0.0123\n");
  });

  it("redraws a live step and cost line on a terminal and clears it at the end", () => {
    const out = capture(true);
    expect(out).toContain("⏳ step 1 · $0.0123 · $ npm test");
    expect(out).toContain("  → $ npm test\n");
    expect(out.endsWith("\r\x1b[2K")).toBe(true);
  });
});

describe("progress printer and terminal controls in what it did not write", () => {
  // OSC 52 sets the clipboard, OSC 8 plants a link, ESC[2J clears the screen, DCS and the 8-bit
  // CSI reach the terminal too; a lone CR or a backspace rewrites what was printed before.
  const hostile =
    "ok\x1b]52;c;ZXZpbA==\x07 \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\\x1b[2J" +
    "\x1bPq#0;2;0;0;0\x1b\\\x9b31mred\x9b0m\x1bc\r\bdone\x00\x7f\x9d0;title\x9c";
  const plain = "ok linkreddone";

  function print(isTTY: boolean, event: AgentEvent) {
    let written = "";
    const printer = createProgressPrinter({ isTTY, write: (text: string) => (written += text) });
    printer.onEvent(event);
    printer.close();
    return written;
  }

  it.each<[string, AgentEvent]>([
    ["model text", { type: "text", step: 1, text: hostile }],
    [
      "a tool call",
      { type: "tool_call", step: 1, id: "t", name: "bash", input: { command: hostile } },
    ],
    [
      "a failed tool's output",
      {
        type: "tool_result",
        step: 1,
        id: "t",
        name: "bash",
        isError: true,
        output: hostile,
        durationMs: 1,
      },
    ],
  ])("prints %s as plain text", (_name, event) => {
    const out = print(false, event);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the controls are what is checked.
    expect(out).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f-\x9f]/);
    expect(out).toContain(plain);
  });

  it("keeps its own status line controls on a terminal", () => {
    const out = print(true, { type: "text", step: 1, text: hostile });
    expect(out).toContain(`${plain}\n`);
    expect(out.endsWith("\r\x1b[2K")).toBe(true);
    expect(out).not.toContain("\x1b]");
    expect(out).not.toContain("\x1b[2J");
  });
});
