// A tool's input is parsed with the schema the tool declares before anything runs: an input that
// does not fit is answered as an error that names the field, so the model can correct its call.
import { access } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { WorkspaceTool } from "../../src/agent/plugin-api.ts";
import { functionTools } from "../../src/agent/providers/openai-tools.ts";
import { bashTool } from "../../src/agent/tools/bash.ts";
import { editorTool } from "../../src/agent/tools/editor.ts";
import { pluginAgentTool } from "../../src/agent/tools/plugin-tool.ts";
import { runToolCalls } from "../../src/agent/tools/run-calls.ts";
import type { AgentTool } from "../../src/agent/tools/types.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

let repo: TestRepo;

beforeEach(async () => {
  repo = await makeRepo({ "a.txt": "alpha\n" });
});

afterEach(async () => {
  await repo.cleanup();
});

const exists = (path: string) =>
  access(join(repo.root, path)).then(
    () => true,
    () => false,
  );

/** The tool_result block the loop sends back for one call of `tool` with `input`. */
async function callOnce(tool: AgentTool, input: unknown) {
  const [result] = await runToolCalls([{ type: "tool_use", id: "t1", name: tool.name, input }], {
    tools: [tool],
    step: 1,
    remainingMs: () => 60_000,
    emit: () => {},
  });
  return result;
}

describe("a tool's input", () => {
  it("of the wrong type for bash is refused by field, and the command does not run", async () => {
    const result = await callOnce(bashTool(repo.workspace), {
      command: "touch ran",
      restart: "yes",
    });
    expect(result).toEqual({
      type: "tool_result",
      tool_use_id: "t1",
      is_error: true,
      content:
        "Invalid input, so nothing was run. restart: Invalid input: expected boolean, received string.",
    });
    expect(await exists("ran")).toBe(false);
  });

  it("of the wrong type for the editor is refused by field, and no file is written", async () => {
    const editor = editorTool(repo.workspace);
    const result = await callOnce(editor, {
      command: "create",
      path: "b.txt",
      file_text: ["not", "text"],
    });
    expect(result).toMatchObject({
      is_error: true,
      content:
        "Invalid input, so nothing was run. file_text: Invalid input: expected string, received array.",
    });
    expect(await exists("b.txt")).toBe(false);
    // Every field that is wrong is named, a missing one too.
    expect(
      await editor.run({ command: "view", view_range: "1-3" }, { remainingMs: 60_000 }),
    ).toEqual({
      isError: true,
      content:
        "Invalid input, so nothing was run. path: Invalid input: expected string, received undefined; view_range: Invalid input: expected array, received string.",
    });
  });

  it("that a plugin's schema refuses never reaches its handler", async () => {
    const handled: unknown[] = [];
    const declared: WorkspaceTool = {
      name: "report_outcome",
      description: "Report how it went.",
      input_schema: {
        type: "object",
        properties: { outcome: { type: "string", enum: ["passed", "failed"] } },
        required: ["outcome"],
      },
      runsIn: "workspace",
      async handler(input) {
        handled.push(input);
        return "recorded";
      },
    };
    const tool = pluginAgentTool(declared, repo.workspace, new Map());
    expect(await callOnce(tool, { outcome: "maybe" })).toMatchObject({
      is_error: true,
      content:
        'Invalid input, so nothing was run. outcome: Invalid option: expected one of "passed"|"failed".',
    });
    expect(await callOnce(tool, {})).toMatchObject({ is_error: true });
    expect(handled).toEqual([]);
    expect(await callOnce(tool, { outcome: "passed", note: "kept" })).toMatchObject({
      content: "recorded",
    });
    expect(handled).toEqual([{ outcome: "passed", note: "kept" }]);
  });

  it("left out as null counts as not given", async () => {
    const result = await callOnce(editorTool(repo.workspace), {
      command: "view",
      path: "a.txt",
      view_range: null,
    });
    expect(result).toMatchObject({ content: "     1\talpha" });
    expect(result).not.toHaveProperty("is_error");
  });
});

describe("the function schemas sent to OpenAI-compatible servers", () => {
  it("are derived from the tools' input schemas, as they were written out before", () => {
    const [bash, editor] = functionTools([bashTool(repo.workspace), editorTool(repo.workspace)]);
    expect(bash?.function.parameters).toEqual({
      type: "object",
      properties: {
        command: { type: "string", description: "The command to run." },
        restart: { type: "boolean", description: "Start over in the repository root." },
      },
    });
    expect(editor?.function.parameters).toEqual({
      type: "object",
      properties: {
        command: { type: "string", enum: ["view", "create", "str_replace", "insert"] },
        path: { type: "string", description: "Relative to the repository root." },
        file_text: { type: "string", description: "create: the whole file." },
        old_str: { type: "string", description: "str_replace: the text to replace." },
        new_str: { type: "string", description: "str_replace and insert: the new text." },
        insert_line: { type: "integer", description: "insert: the line to insert after." },
        // The one field added: the native editor's name for an insert's text.
        insert_text: { type: "string", description: "insert: the new text (or in new_str)." },
        view_range: {
          type: "array",
          items: { type: "integer" },
          description: "view: [first, last] line; -1 as last means the end.",
        },
      },
      required: ["command", "path"],
    });
  });
});
