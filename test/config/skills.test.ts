import { describe, expect, it } from "vitest";
import { isSkillFile, parseSkill } from "../../src/config/skills.ts";

const PATH = ".github/vmpilot/skills/release/SKILL.md";

describe("a skill's front matter", () => {
  it("names the skill and says when it applies; other keys are allowed", () => {
    const text = "---\nname: release\ndescription: Cut a release.\nlicense: MIT\n---\n# Body\n";
    expect(parseSkill(PATH, text)).toEqual({
      ok: true,
      skill: { name: "release", description: "Cut a release.", path: PATH },
    });
  });

  it.each([
    ["# Release\n", 1, "", "must start with front matter"],
    ["---\nname: release\n", 1, "", "no closing --- line"],
    ["---\nname: release\n---\n", 2, "description", "expected string, received undefined"],
    ["---\ndescription: x\nname: Release Notes\n---\n", 3, "name", "must be lowercase letters"],
    ["---\nname: release\ndescription: '  '\n---\n", 3, "description", "must not be empty"],
    // Where the parser finds out: the line after the unclosed list.
    ["---\nname: release\ndescription: [unclosed\n---\n", 4, "", "invalid YAML"],
    ["---\n- a list\n---\n", 2, "", "must be a mapping"],
  ])("refuses %j at its line in the file", (text, line, key, message) => {
    const result = parseSkill(PATH, text);
    if (result.ok) throw new Error("accepted");
    expect(result.issues[0]).toMatchObject({ path: key, line });
    expect(result.issues[0]?.message).toContain(message);
  });

  it("knows a skill's file by its place", () => {
    expect(isSkillFile(PATH)).toBe(true);
    expect(isSkillFile(".claude/skills/db/SKILL.md")).toBe(true);
    expect(isSkillFile(".claude/skills/db/notes.md")).toBe(false);
    expect(isSkillFile(".claude/skills/SKILL.md")).toBe(false);
    expect(isSkillFile(".claude/skills/a/b/SKILL.md")).toBe(false);
    expect(isSkillFile("docs/skills/a/SKILL.md")).toBe(false);
  });
});
