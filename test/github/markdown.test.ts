import { describe, expect, it } from "vitest";
import { codeSpan } from "../../src/github/markdown.ts";

describe("codeSpan", () => {
  it.each([
    ["plain", "model", "`model`"],
    ["single backticks", "a`b", "``a`b``"],
    ["a run of backticks", "a``b`c", "```a``b`c```"],
    ["leading backtick", "`@x", "`` `@x ``"],
    ["line breaks", "a\n\nb", "`a b`"],
  ])("%s", (_name, input, expected) => {
    expect(codeSpan(input)).toBe(expected);
  });
});
