import { describe, expect, it } from "vitest";
import { lineDiff } from "../../src/github/line-diff.ts";

const show = (before: string, after: string) =>
  lineDiff(before, after).map((l) => (l.kind === "…" ? `… ${l.skipped}` : `${l.kind}${l.text}`));

describe("lineDiff", () => {
  it("marks removed and added lines between common ones", () => {
    expect(show("a\nb\nc\n", "a\nB\nc\nd\n")).toEqual([" a", "-b", "+B", " c", "+d"]);
  });

  it("shows a new file as all additions and a deletion as all removals", () => {
    expect(show("", "x\ny")).toEqual(["+x", "+y"]);
    expect(show("x\n", "")).toEqual(["-x"]);
  });

  it("folds unchanged runs longer than the context", () => {
    const before = Array.from({ length: 20 }, (_, i) => `line ${i}`).join("\n");
    const after = before.replace("line 10", "LINE 10");
    expect(show(before, after)).toEqual([
      "… 7",
      " line 7",
      " line 8",
      " line 9",
      "-line 10",
      "+LINE 10",
      " line 11",
      " line 12",
      " line 13",
      "… 6",
    ]);
  });

  it("keeps interleaved changes in order", () => {
    expect(show("a\nx\nb\ny\nc", "a\nb\nc")).toEqual([" a", "-x", " b", "-y", " c"]);
  });

  it("stays fast on large edits by giving up on alignment", () => {
    const big = (p: string) => Array.from({ length: 3000 }, (_, i) => `${p}${i}`).join("\n");
    const started = performance.now();
    const lines = lineDiff(big("a"), big("b"));
    expect(performance.now() - started).toBeLessThan(1000);
    expect(lines.filter((l) => l.kind === "-")).toHaveLength(3000);
  });
});
