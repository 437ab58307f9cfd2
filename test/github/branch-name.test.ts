import { describe, expect, it } from "vitest";
import {
  chooseIssueBranch,
  issueBranchName,
  isValidBranchName,
  isVmpilotBranch,
  slugify,
} from "../../src/github/branch-name.ts";

describe("issueBranchName", () => {
  it.each([
    [12, "Fix the login crash", "vmpilot/issue-12-fix-the-login-crash"],
    [3, "  Crème brûlée: ümlauts & emoji 🚀 ", "vmpilot/issue-3-creme-brulee-umlauts-emoji"],
    [7, "$(rm -rf /) `id` ; --upload-pack=evil", "vmpilot/issue-7-rm-rf-id-upload-pack-evil"],
    [9, "../../etc/passwd .lock @{-1}", "vmpilot/issue-9-etc-passwd-lock-1"],
    [5, "日本語のタイトル", "vmpilot/issue-5"],
    [1, "", "vmpilot/issue-1"],
  ])("#%i %j → %s", (number, title, expected) => {
    const name = issueBranchName(number, title);
    expect(name).toBe(expected);
    expect(isValidBranchName(name)).toBe(true);
  });

  it("keeps the slug within 40 characters, cut at a word", () => {
    const slug = slugify("Make the settings page remember the selected repository across reloads");
    expect(slug).toBe("make-the-settings-page-remember-the");
    expect(slug.length).toBeLessThanOrEqual(40);
    expect(slugify("a".repeat(90))).toBe("a".repeat(40));
  });

  it("rejects a nonsense issue number", () => {
    expect(() => issueBranchName(0, "x")).toThrow(/bad issue number/);
  });
});

describe("isValidBranchName", () => {
  it.each(["vmpilot/issue-1-x", "feature/my_branch.v2", "main"])("accepts %s", (name) =>
    expect(isValidBranchName(name)).toBe(true),
  );

  it.each([
    "",
    "-evil",
    "--upload-pack=x",
    "a b",
    "a..b",
    "a/.hidden",
    "a.lock",
    "a/b.lock/c",
    "a/",
    "/a",
    "a//b",
    "a.",
    "HEAD",
    "a@{1}",
    "a~1",
    "a^",
    "a:b",
    "a\\b",
    "a\nb",
    "a*",
    "ü",
    "x".repeat(201),
  ])("refuses %j", (name) => expect(isValidBranchName(name)).toBe(false));
});

describe("chooseIssueBranch", () => {
  it("reuses the conversation's branch on follow-ups, even when the title changed", () => {
    expect(
      chooseIssueBranch({ existing: "vmpilot/issue-4-old-title", number: 4, title: "New title" }),
    ).toBe("vmpilot/issue-4-old-title");
  });

  it("names a new branch when the conversation has none, or a stored one that is not ours", () => {
    expect(chooseIssueBranch({ existing: null, number: 4, title: "New title" })).toBe(
      "vmpilot/issue-4-new-title",
    );
    expect(chooseIssueBranch({ existing: "main", number: 4, title: "T" })).toBe(
      "vmpilot/issue-4-t",
    );
    expect(isVmpilotBranch("vmpilot/../main")).toBe(false);
  });
});
