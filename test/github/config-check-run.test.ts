import { describe, expect, it } from "vitest";
import { configFailureRun } from "../../src/github/config-check-run.ts";

describe("configFailureRun", () => {
  it("annotates 50 issues at most, by line, and says how many more there are", () => {
    const issues = Array.from({ length: 52 }, (_, n) => ({
      path: `key${n}`,
      message: "unknown key",
      line: 52 - n,
    }));
    const run = configFailureRun("0".repeat(40), issues);
    const annotations = run.output.annotations ?? [];
    expect(annotations).toHaveLength(50);
    expect(annotations.map((a) => a.start_line)).toEqual(
      Array.from({ length: 50 }, (_, n) => n + 1),
    );
    expect(run.output.title).toBe("52 errors in .github/vmpilot.yml");
    expect(run.output.summary).toMatch(/\n\n2 more not shown: GitHub takes 50 at most\.$/);
  });
});
