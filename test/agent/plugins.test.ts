import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { WorkerCapabilities, WorkspaceCapabilities } from "../../src/agent/plugin-api.ts";
import {
  DEFAULT_ENABLED_PLUGINS,
  discoverPlugins,
  PluginError,
  selectPlugins,
} from "../../src/agent/plugins.ts";
import { pluginAgentTool } from "../../src/agent/tools/plugin-tool.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

describe("plugin discovery", () => {
  let dir: string;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "vmpilot-plugins-"));
  });

  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function plugin(name: string, files: Record<string, string>) {
    await mkdir(join(dir, name), { recursive: true });
    for (const [file, content] of Object.entries(files))
      await writeFile(join(dir, name, file), content);
  }

  it("finds the shipped plugins with their guidance, tools and hooks", async () => {
    const plugins = await discoverPlugins();
    expect(plugins.map((p) => p.name)).toEqual([
      "code_review",
      "documentation",
      "project",
      "testing",
    ]);
    for (const p of plugins) {
      expect(p.description.length).toBeGreaterThan(10);
      expect(p.guidance.length).toBeGreaterThan(100);
    }
    const testing = plugins.find((p) => p.name === "testing");
    expect(testing?.tools.map((t) => [t.name, t.runsIn])).toEqual([["report_tests", "workspace"]]);
    expect(typeof testing?.finishCheck).toBe("function");
    expect(typeof plugins.find((p) => p.name === "project")?.context).toBe("function");
    expect(selectPlugins(plugins, DEFAULT_ENABLED_PLUGINS).map((p) => p.name)).toEqual([
      "project",
      "testing",
      "documentation",
    ]);
  });

  it("rejects unknown plugin names with the list of known ones", async () => {
    const plugins = await discoverPlugins();
    expect(() => selectPlugins(plugins, ["testing", "deploy"])).toThrow(
      'unknown plugin "deploy" (available: code_review, documentation, project, testing)',
    );
  });

  it("requires front matter whose name matches the folder", async () => {
    await plugin("alpha", { "README.md": "# no front matter\n" });
    await expect(discoverPlugins(dir)).rejects.toThrow(
      "alpha/README.md must start with front matter",
    );
    await plugin("alpha", { "README.md": "---\nname: beta\ndescription: x\n---\nbody\n" });
    await expect(discoverPlugins(dir)).rejects.toThrow(
      'names itself "beta"; it must match the folder',
    );
    await plugin("alpha", { "README.md": "---\nname: alpha\n---\nbody\n" });
    await expect(discoverPlugins(dir)).rejects.toThrow(PluginError);
  });

  it("validates exported tools and rejects duplicate tool names", async () => {
    await plugin("alpha", {
      "README.md": "---\nname: alpha\ndescription: first\n---\nUse it.\n",
      "tools.ts":
        'export const tools = [{ name: "shout", description: "d", input_schema: { type: "object" }, runsIn: "sky" }];\n',
    });
    await expect(discoverPlugins(dir)).rejects.toThrow(
      /plugins\/alpha\/tools\.ts: 0\.runsIn .*; 0\.handler must be a function/,
    );

    const tool =
      'export const tools = [{ name: "shout", description: "d", input_schema: { type: "object" }, runsIn: "worker", handler: async () => "ok" }];\n';
    // Modules are cached per path, so the fixed plugin goes into fresh folders.
    await rm(join(dir, "alpha"), { recursive: true });
    await plugin("gamma", {
      "README.md": "---\nname: gamma\ndescription: first\n---\nUse it.\n",
      "tools.ts": tool,
    });
    await plugin("delta", {
      "README.md": "---\nname: delta\ndescription: second\n---\nUse it.\n",
      "tools.ts": tool,
    });
    await expect(discoverPlugins(dir)).rejects.toThrow(
      "tool shout is defined by both delta and gamma",
    );
  });
});

describe("plugin tools", () => {
  let repo: TestRepo;

  beforeEach(async () => {
    repo = await makeRepo({ "notes.txt": "hello\n" });
  });

  afterEach(async () => {
    await repo.cleanup();
  });

  it("give worker handlers read-only capabilities and workspace handlers exec", async () => {
    const reports = new Map<string, unknown>();
    let worker: WorkerCapabilities | undefined;
    let inWorkspace: WorkspaceCapabilities | undefined;
    const readOnly = pluginAgentTool(
      {
        name: "peek",
        description: "d",
        input_schema: { type: "object" },
        runsIn: "worker",
        handler: async (input, can) => {
          worker = can;
          can.report("peeked", input.path);
          return can.readFile(String(input.path));
        },
      },
      repo.workspace,
      reports,
    );
    const runner = pluginAgentTool(
      {
        name: "count",
        description: "d",
        input_schema: { type: "object" },
        runsIn: "workspace",
        handler: async (_, can) => {
          inWorkspace = can;
          const result = await can.exec("wc -l < notes.txt");
          return { content: result.stdout.trim(), isError: result.exitCode !== 0 };
        },
      },
      repo.workspace,
      reports,
    );

    expect(await readOnly.run({ path: "notes.txt" }, { remainingMs: 10_000 })).toEqual({
      content: "hello\n",
      isError: false,
    });
    expect(worker && Object.keys(worker).sort()).toEqual([
      "listDir",
      "readFile",
      "report",
      "signal",
    ]);
    expect(reports.get("peeked")).toBe("notes.txt");
    expect(await runner.run({}, { remainingMs: 10_000 })).toEqual({
      content: "1",
      isError: false,
      exec: { command: "wc -l < notes.txt", exitCode: 0 },
    });
    expect(inWorkspace && "exec" in inWorkspace).toBe(true);
    expect(await readOnly.run({ path: "../../etc/passwd" }, { remainingMs: 10_000 })).toMatchObject(
      {
        isError: true,
        content: expect.stringMatching(/^peek failed: Path .* is outside the workspace/),
      },
    );
  });
});
