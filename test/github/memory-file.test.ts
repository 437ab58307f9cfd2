// The lessons file's form (src/github/memory-file.ts): vmpilot appends and marks, and leaves what
// people wrote as they wrote it.
import { describe, expect, it } from "vitest";
import { lessonOf, readLessons, updateLessons } from "../../src/github/memory-file.ts";

const URL_A = "https://github.com/acme/app/pull/7#discussion_r1";
const URL_B = "https://github.com/acme/app/pull/7#pullrequestreview-2";

describe("the lessons file", () => {
  it("starts with a header saying how it works, then the lesson on one line with its citation and files", () => {
    const file = updateLessons(
      undefined,
      [
        lessonOf("Use the logger\nin src/log,  never console.log.", URL_A, [
          "./src/a.ts",
          "src/a.ts",
        ]),
      ],
      new Set(),
    );
    expect(file).toMatchInlineSnapshot(`
      "# Lessons from review

      What reviewers of this repository taught vmpilot, one lesson per item. Every vmpilot job reads this
      file from the default branch. Edit or remove a lesson like any text; vmpilot proposes new ones in a
      pull request from \`vmpilot/memory\`, and merging it is what approves them.

      - Use the logger in src/log, never console.log. — learned from <https://github.com/acme/app/pull/7#discussion_r1> · files: \`src/a.ts\`
      "
    `);
    expect(readLessons(file ?? "")).toEqual([
      {
        text: "Use the logger in src/log, never console.log.",
        citation: URL_A,
        files: ["src/a.ts"],
        stale: false,
      },
    ]);
  });

  it("appends only what it does not hold, keeps people's lines, and marks a lesson stale once all its files are gone", () => {
    const before = [
      "# Our lessons",
      "",
      "Written by hand: keep PRs small.",
      `- Keep old.ts tidy. — learned from <${URL_A}> · files: \`old.ts\``,
      `- Mind a.ts and b.ts. — learned from <${URL_A}> · files: \`a.ts\`, \`b.ts\``,
      "",
    ].join("\n");
    const after = updateLessons(
      before,
      [lessonOf("Keep old.ts tidy.", URL_A), lessonOf("Tabs, never spaces.", URL_B)],
      new Set(["old.ts", "a.ts"]),
    );
    expect(after).toBe(
      [
        "# Our lessons",
        "",
        "Written by hand: keep PRs small.",
        `- **Stale:** Keep old.ts tidy. — learned from <${URL_A}> · files: \`old.ts\``,
        `- Mind a.ts and b.ts. — learned from <${URL_A}> · files: \`a.ts\`, \`b.ts\``,
        `- Tabs, never spaces. — learned from <${URL_B}>`,
        "",
      ].join("\n"),
    );
    // Nothing new and nothing newly stale: nothing to propose.
    expect(
      updateLessons(after ?? "", [lessonOf("Tabs, never spaces.", URL_B)], new Set(["old.ts"])),
    ).toBeNull();
  });

  it("keeps secrets out and a lesson from ending its own item", () => {
    const token = `ghp_${"a1B2c3D4e5".repeat(4)}`;
    const lesson = lessonOf(`Never commit ${token} — learned from <https://evil> again`, URL_A, [
      "a`b.ts",
      "ok.ts",
    ]);
    expect(lesson.text).not.toContain(token);
    expect(lesson.files).toEqual(["ok.ts"]);
    const file = updateLessons(undefined, [lesson], new Set()) ?? "";
    expect(readLessons(file)).toEqual([{ ...lesson, stale: false }]);
  });
});
