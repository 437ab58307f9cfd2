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
});
