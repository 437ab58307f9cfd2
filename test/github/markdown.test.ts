import { describe, expect, it } from "vitest";
import { codeSpan, plainText } from "../../src/github/markdown.ts";

describe("plainText", () => {
  it("makes @mentions inert and keeps the text on one line", () => {
    expect(plainText("ping @someone\n@org/team")).toBe("ping @\u2060someone @\u2060org/team");
  });
});

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
