import { describe, expect, it } from "vitest";
import { REPLY_END, renderReply } from "../../src/jobs/chat-reply/reply.ts";
import type { JobEvent } from "../../src/store/job-events.ts";
import { renderEvent } from "../../src/web/timeline.ts";

const at = new Date("2026-01-02T03:04:05Z");
const render = (type: string, data: Record<string, unknown>) =>
  renderEvent({ id: 9, jobId: 1, at, type, data } satisfies JobEvent).value;

describe("renderEvent", () => {
  it("renders a step heading with the event's id for the live page", () => {
    expect(render("step_started", { step: 3 })).toBe(
      '<li id="ev-9" class="step"><h3>Step 3</h3></li>',
    );
  });

  it("shows a created file as an all-added diff and a view as one line", () => {
    const created = render("tool_call", {
      name: "str_replace_based_edit_tool",
      input: { command: "create", path: "a.txt", file_text: "x\ny\n" },
    });
    expect(created).toContain("Created <code>a.txt</code>");
    expect(created).toContain('<span class="add">+ x</span><span class="add">+ y</span>');
    expect(
      render("tool_call", {
        name: "str_replace_based_edit_tool",
        input: { command: "view", path: "b" },
      }),
    ).toContain("Viewed <code>b</code>");
  });

  it("marks failed tool results and redacts secrets in them", () => {
    const out = render("tool_result", {
      name: "bash",
      isError: true,
      output: "short",
      log: "key sk-ant-api03-abcdefghijklmnop",
    });
    expect(out).toContain('class="tool-result tool-error"');
    expect(out).toContain("Error from bash (1 line)");
    expect(out).toContain("key [REDACTED]");
  });

  it("shows other tools' input as JSON and unknown pipeline events by name", () => {
    expect(render("tool_call", { name: "code_review", input: { line: "<x>" } })).toContain(
      "&quot;line&quot;: &quot;&lt;x&gt;&quot;",
    );
    const refused = render("refused", { message: "bob may not trigger <b>", permission: "read" });
    expect(refused).toContain("<strong>Refused</strong>: bob may not trigger &lt;b&gt;<details>");
    expect(refused).toContain("&quot;permission&quot;: &quot;read&quot;");
  });

  it("shows the outcome of the run", () => {
    expect(render("failed", { code: "api_overloaded", error: "Overloaded" })).toContain(
      "<strong>Failed</strong> (api_overloaded):",
    );
    expect(
      render("finished", { reason: "max_cost", steps: 4, detail: "Cost cap reached" }),
    ).toContain("Cost cap reached");
  });

  it("shows events stored in odd shapes by name and fields, and a chat reply still ends", () => {
    // Stored as free JSON by every version of the app: a shape this one does not expect must
    // neither break the page nor run a chat reply past its end.
    const odd: Pick<JobEvent, "type" | "data">[] = [
      { type: "tool_call", data: { name: "bash", input: "rm -rf /" } },
      { type: "tool_call", data: { name: "str_replace_based_edit_tool", input: { command: 7 } } },
      { type: "usage", data: { turn: { inputTokens: 1 }, totals: [1, 2] } },
      { type: "text", data: { text: ["not", "text"] } },
      { type: "tool_result", data: { name: "bash", output: { lines: 2 } } },
      { type: "refused", data: { message: { why: "no" } } },
      { type: REPLY_END, data: { usage: [3], costUsd: "a lot", tests: 1 } },
      { type: "text", data: { text: "after the end" } },
    ];
    const page = odd.map(({ type, data }) => render(type, data));
    expect(page[0]).toContain("Called <code>bash</code>");
    expect(page[0]).toContain("&quot;rm -rf /&quot;");
    expect(page[1]).toContain("Called <code>str_replace_based_edit_tool</code>");
    expect(page[2]).toContain("<strong>Usage</strong><details>");
    expect(page[3]).toContain("<strong>Text</strong><details>");
    expect(page[4]).toContain("<strong>Tool result</strong><details>");
    expect(page[5]).toContain("&quot;why&quot;: &quot;no&quot;");
    expect(renderReply(odd)).toBe(
      "_bash_\n\n_str_replace_based_edit_tool_\n\n---\nTokens: 0 in, 0 out · cost $0.0000\n",
    );
  });

  it("shows a request's usage, and and an older event's, which named it `turn`, alike", () => {
    const usage = { inputTokens: 1200, outputTokens: 300, costUsd: 0.0081 };
    const totals = { inputTokens: 5000, outputTokens: 900, costUsd: 0.05 };
    expect(render("usage", { step: 2, request: usage, totals })).toBe(
      '<li id="ev-9" class="usage muted">Tokens: 1,200 in, 300 out, 0 cache · cost $0.0081 (job so far $0.0500)</li>',
    );
    expect(render("usage", { step: 2, turn: usage, totals })).toBe(
      '<li id="ev-9" class="usage muted">Tokens: 1,200 in, 300 out, 0 cache · cost $0.0081 (job so far $0.0500)</li>',
    );
  });
});
