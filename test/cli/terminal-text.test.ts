import { describe, expect, it } from "vitest";
import { terminalText } from "../../src/cli/terminal-text.ts";

describe("terminalText", () => {
  it("keeps text, tabs and newlines of a diff, and turns CR LF into LF", () => {
    const diff = "--- a/x\r\n+++ b/x\n@@ -1 +1 @@\n-\told\n+\tnew é ✓\n";
    expect(terminalText(diff)).toBe("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-\told\n+\tnew é ✓\n");
  });

  it("drops whole sequences with their payloads, and the introducer of an unterminated one", () => {
    expect(terminalText("a\x1b]52;c;ZXZpbA==\x1b\\b\x1b[1;31mc\x1b[0m\x1bP1$r\x1b\\d")).toBe(
      "abcd",
    );
    expect(terminalText("file\x1b]8;;https://evil.example")).toBe("file8;;https://evil.example");
    expect(terminalText("x\x1b[")).toBe("x");
  });
});
