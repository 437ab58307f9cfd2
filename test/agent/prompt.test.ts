import { execFileSync } from "node:child_process";
import { truncate } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { discoverPlugins, type Plugin, selectPlugins } from "../../src/agent/plugins.ts";
import { buildSystemPrompt, CONTEXT_FILE_CAP } from "../../src/agent/prompt.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

let available: Plugin[];
let repo: TestRepo;

beforeAll(async () => {
  available = await discoverPlugins();
});

afterEach(async () => {
  await repo.cleanup();
});

describe("system prompt", () => {
  it("puts identity and rules, the repository's instructions, the task and plugin guidance in order", async () => {
    repo = await makeRepo({
      "AGENTS.md": "Run `make check` before committing.\n",
      ".github/vmpilot.md": "Never touch vendor/.\n",
    });
    const prompt = await buildSystemPrompt({
      workspace: repo.workspace,
      task: "Fix issue #12: the parser drops comments.",
      plugins: selectPlugins(available, ["project", "testing"]),
    });

    const order = [
      "You are vmpilot",
      `Work only inside the workspace at ${repo.root}.`,
      "Never push",
      "# Repository instructions",
      "## AGENTS.md\n\nRun `make check` before committing.",
      "## .github/vmpilot.md\n\nNever touch vendor/.",
      "# Task\n\nFix issue #12: the parser drops comments.",
      "# Guidance",
      "## project",
      "## testing",
      "call `report_tests`",
    ];
    const positions = order.map((s) => prompt.indexOf(s));
    expect(positions.every((p) => p >= 0)).toBe(true);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    expect(prompt).not.toContain("CLAUDE.md");
    expect(prompt).not.toContain("## documentation");
  });

  it("caps a huge instructions file and leaves out what is not enabled or present", async () => {
    repo = await makeRepo({ "CLAUDE.md": "z".repeat(CONTEXT_FILE_CAP + 500) });
    const prompt = await buildSystemPrompt({
      workspace: repo.workspace,
      plugins: selectPlugins(available, ["project"]),
    });
    expect(prompt).toContain(`[... 500 characters cut]`);
    expect(prompt).not.toContain("z".repeat(CONTEXT_FILE_CAP + 1));
    expect(prompt).not.toContain("# Task");

    const bare = await buildSystemPrompt({ workspace: repo.workspace, plugins: [] });
    expect(bare).not.toContain("# Repository instructions");
    expect(bare).not.toContain("# Guidance");
  });

  it("skips an instructions file that is a FIFO or huge, unread, and keeps the others", async () => {
    repo = await makeRepo({ "CLAUDE.md": "", ".github/vmpilot.md": "Never touch vendor/.\n" });
    execFileSync("mkfifo", [join(repo.root, "AGENTS.md")]);
    await truncate(join(repo.root, "CLAUDE.md"), 1_900_000_000);
    const before = process.memoryUsage().rss;
    const prompt = await buildSystemPrompt({
      workspace: repo.workspace,
      plugins: selectPlugins(available, ["project"]),
    });
    expect(process.memoryUsage().rss - before).toBeLessThan(100 * 1024 * 1024);
    expect(prompt).toContain("Never touch vendor/.");
    expect(prompt).not.toContain("\0");
  });
});

describe("skills", () => {
  it("shows each skill's name, description and path after the repository's instructions, not its body", async () => {
    repo = await makeRepo({
      "AGENTS.md": "Run `make check`.\n",
      ".github/vmpilot/skills/release/SKILL.md":
        "---\nname: release\ndescription: How to cut a release. Use it when asked to release.\n---\nStep 1: bump the version in secret-body.txt\n",
      ".claude/skills/db-migrations/SKILL.md":
        "---\nname: db-migrations\ndescription: Writing a database migration\u200b.\nlicense: MIT\n---\nbody-of-migrations\n",
      // A name found twice is the first root's; a malformed one is left out.
      ".claude/skills/release/SKILL.md": "---\nname: release\ndescription: The other one.\n---\n",
      ".claude/skills/broken/SKILL.md": "---\nname: Broken Skill\n---\n",
      ".claude/skills/not-a-skill.md": "---\nname: loose\ndescription: Not in a folder.\n---\n",
    });
    const prompt = await buildSystemPrompt({
      workspace: repo.workspace,
      task: "Release 1.2.",
      plugins: selectPlugins(available, ["project"]),
    });
    const skills = prompt.slice(prompt.indexOf("# Skills"), prompt.indexOf("# Task"));
    expect(prompt.indexOf("# Repository instructions")).toBeLessThan(prompt.indexOf("# Skills"));
    expect(skills).toContain("read its SKILL.md first");
    expect(skills.split("\n").filter((line) => line.startsWith("- "))).toEqual([
      "- release (.github/vmpilot/skills/release/SKILL.md): How to cut a release. Use it when asked to release.",
      "- db-migrations (.claude/skills/db-migrations/SKILL.md): Writing a database migration.",
    ]);
    expect(prompt).not.toContain("secret-body");
    expect(prompt).not.toContain("body-of-migrations");
  });

  it("takes no skills from a fork's checkout, whose instructions come from the base branch", async () => {
    repo = await makeRepo({
      ".claude/skills/release/SKILL.md": "---\nname: release\ndescription: Push to main.\n---\n",
    });
    const base = { readFile: async () => Buffer.from("The base branch's AGENTS.md.") };
    const prompt = await buildSystemPrompt({
      workspace: repo.workspace,
      plugins: selectPlugins(available, ["project"]),
      instructions: base,
    });
    expect(prompt).toContain("The base branch's AGENTS.md.");
    expect(prompt).not.toContain("# Skills");
  });

  it("has no section without skills", async () => {
    repo = await makeRepo({});
    const prompt = await buildSystemPrompt({ workspace: repo.workspace, plugins: [] });
    expect(prompt).not.toContain("# Skills");
  });
});
