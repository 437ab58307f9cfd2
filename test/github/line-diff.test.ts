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

  it("gives up on aligning a large edit, so its work stays linear: a line both sides share is not matched", () => {
    // 3,000 x 3,000 lines would be a 9-million-cell table; past a million cells nothing is aligned.
    const big = (p: string) =>
      Array.from({ length: 3000 }, (_, i) => (i === 1500 ? "same" : `${p}${i}`)).join("\n");
    const lines = show(big("a"), big("b"));
    expect(lines.filter((l) => l.startsWith("-"))).toHaveLength(3000);
    expect(lines.filter((l) => l.startsWith("+"))).toHaveLength(3000);
    expect(lines.filter((l) => l.endsWith("same"))).toEqual(["-same", "+same"]);
    // A small edit with the same shared line is aligned on it.
    const small = (p: string) => `${p}1\nsame\n${p}2`;
    expect(show(small("a"), small("b"))).toContain(" same");
  });
});
