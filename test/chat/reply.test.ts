import { describe, expect, it } from "vitest";
import { extendHash } from "../../src/jobs/chat-reply/history-hash.ts";
import { fenceLanguage } from "../../src/jobs/chat-reply/language.ts";
import { REPLY_END, renderReply, replyPiece, WORKING } from "../../src/jobs/chat-reply/reply.ts";

const result = (output: string, isError = false, name = "bash") => ({
  type: "tool_result",
  data: { name, output, isError },
});

describe("the chat reply", () => {
  it("fences each command's output in the language its shape suggests, plain text when unsure", () => {
    expect(fenceLanguage("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b")).toBe("diff");
    expect(fenceLanguage('{"ok": true, "n": [1, 2]}')).toBe("json");
    expect(fenceLanguage("{not json")).toBe("text");
    expect(
      fenceLanguage('Traceback (most recent call last):\n  File "a.py", line 1\nValueError: x'),
    ).toBe("pytb");
    expect(fenceLanguage("TypeError: x\n    at run (/app/src/a.js:3:9)")).toBe("js");
    expect(fenceLanguage('import { a } from "./a.ts";\nexport const b = a;')).toBe("typescript");
    expect(fenceLanguage("def main():\n    pass")).toBe("python");
    expect(fenceLanguage("total 4\ndrwxr-xr-x 2 sandbox sandbox 4096 README.md")).toBe("text");
  });

  it("shows a command, its output with the exit status, and an edit as a diff", () => {
    const call = replyPiece({
      type: "tool_call",
      data: { name: "bash", input: { command: "npm test" } },
    });
    expect(call).toBe("```bash\n$ npm test\n```\n\n");
    expect(replyPiece(result("1 passing"))).toBe("```text\n1 passing\n```\n\n_exit 0_\n\n");
    expect(replyPiece(result("boom\nExit code: 2", true))).toBe(
      "```text\nboom\nExit code: 2\n```\n\n",
    );
    const edit = replyPiece({
      type: "tool_call",
      data: {
        name: "str_replace_based_edit_tool",
        input: { command: "str_replace", path: "src/a.js", old_str: "a - b", new_str: "a + b" },
      },
    });
    expect(edit).toBe("```diff\n--- a/src/a.js\n+++ b/src/a.js\n-a - b\n+a + b\n```\n\n");
    // A viewed file is not news; an editor's successful result neither.
    expect(
      replyPiece({
        type: "tool_call",
        data: { name: "str_replace_based_edit_tool", input: { command: "view", path: "a" } },
      }),
    ).toBe("");
    expect(replyPiece(result("ok", false, "str_replace_based_edit_tool"))).toBe("");
  });

  it("keeps output from closing its fence, and cuts long output with a marker", () => {
    const piece = replyPiece(result("before\n```\nafter"));
    expect(piece.startsWith("````text\n")).toBe(true);
    expect(piece).toContain("\n````\n");
    const long = replyPiece(result("x".repeat(20_000)));
    expect(long).toMatch(/\[… 14000 characters cut …\]/);
    expect(long.length).toBeLessThan(7_000);
  });

  it("ends with the tests, tokens and cost, and stops at the end marker", () => {
    const reply = renderReply([
      { type: "text", data: { text: "Done." } },
      {
        type: REPLY_END,
        data: { tests: "passed", usage: { inputTokens: 10, outputTokens: 5 }, costUsd: 0.0123 },
      },
      { type: "text", data: { text: "after the end" } },
    ]);
    expect(reply).toBe("Done.\n\n---\nTests: passed  \nTokens: 10 in, 5 out · cost $0.0123\n");
  });

  it("finds a reply sent back streamed (with the placeholder) or not, and one stored with it", () => {
    const reply = "Done.\n\n---\nTests: passed\n";
    const hash = (role: "user" | "assistant", text: string) => extendHash("h", { role, text });
    const stored = hash("assistant", reply);
    expect(hash("assistant", `${WORKING}${reply}`)).toBe(stored);
    expect(hash("assistant", `  ${WORKING}${reply.trim()}`)).toBe(stored);
    expect(hash("assistant", "")).toBe(hash("assistant", WORKING));
    expect(hash("assistant", "Done.")).not.toBe(stored);
    // A person's words are theirs: the placeholder in them is not skipped.
    expect(hash("user", `${WORKING}hi`)).not.toBe(hash("user", "hi"));
  });
});
