import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { runAgent } from "../../src/agent/loop.ts";
import { discoverPlugins, type Plugin, selectPlugins } from "../../src/agent/plugins.ts";
import {
  type AnthropicFake,
  type FakeStep,
  startAnthropicFake,
  text,
  toolUse,
} from "../helpers/anthropic-fake.ts";
import { makeRepo, type TestRepo } from "./setup.ts";

let plugins: Plugin[];
let repo: TestRepo;
let fake: AnthropicFake;

beforeAll(async () => {
  plugins = selectPlugins(await discoverPlugins(), ["testing"]);
});

beforeEach(async () => {
  repo = await makeRepo({
    "math.js": "export const add = (a, b) => a - b;\n",
    "test.sh": "grep -q 'a + b' math.js || { echo 'add(1, 2) should be 3'; exit 1; }\n",
  });
});

afterEach(async () => {
  await fake.close();
  await repo.cleanup();
});

async function run(...script: FakeStep[]) {
  fake = await startAnthropicFake(script);
  const result = await runAgent({
    workspace: repo.workspace,
    system: "test",
    model: "claude-haiku-4-5",
    instruction: "Fix add.",
    plugins,
    client: { apiKey: "test-key", baseURL: fake.url, maxRetries: 0 },
  });
  expect(fake.problems).toEqual([]);
  expect(fake.pending()).toBe(0);
  return result;
}

// biome-ignore lint/suspicious/noExplicitAny: request JSON.
const lastBlock = (body: any) => body.messages.at(-1).content.at(-1);

describe("testing plugin", () => {
  it("is done only once the tests really pass", async () => {
    const result = await run(
      { content: [text("Done, I think.")] },
      ({ body }) => {
        expect(lastBlock(body).text).toContain("call report_tests");
        return { content: [toolUse("report_tests", { outcome: "passed", command: "sh test.sh" })] };
      },
      ({ body }) => {
        expect(lastBlock(body)).toMatchObject({ type: "tool_result", is_error: true });
        expect(lastBlock(body).content).toContain("`sh test.sh` exited 1");
        expect(lastBlock(body).content).toContain("add(1, 2) should be 3");
        return {
          content: [
            toolUse("str_replace_based_edit_tool", {
              command: "str_replace",
              path: "math.js",
              old_str: "a - b",
              new_str: "a + b",
            }),
          ],
        };
      },
      { content: [toolUse("report_tests", { outcome: "passed", command: "sh test.sh" })] },
      ({ body }) => {
        expect(lastBlock(body).content).toBe("Recorded: the tests pass (`sh test.sh` exited 0).");
        return { content: [text("Fixed add; sh test.sh passes.")] };
      },
    );
    expect(result.reason).toBe("end_turn");
    expect(result.detail).toBeUndefined();
    expect(result.reports).toEqual({
      tests: { outcome: "passed", command: "sh test.sh", exitCode: 0 },
    });
    expect(await readFile(join(repo.root, "math.js"), "utf8")).toBe(
      "export const add = (a, b) => a + b;\n",
    );
  });

  it("accepts an explanation instead of passing tests, but not an empty one", async () => {
    const result = await run(
      { content: [toolUse("report_tests", { outcome: "not_run" })] },
      ({ body }) => {
        expect(lastBlock(body)).toMatchObject({
          is_error: true,
          content: "outcome not_run needs an `explanation`.",
        });
        return {
          content: [
            toolUse("report_tests", {
              outcome: "not_run",
              explanation: "The suite needs a database that is not available.",
            }),
          ],
        };
      },
      { content: [text("Could not run the tests; see the report.")] },
    );
    expect(result.reason).toBe("end_turn");
    expect(result.reports.tests).toEqual({
      outcome: "not_run",
      explanation: "The suite needs a database that is not available.",
    });
  });

  it("sends the model back twice at most, then finishes saying the check is unmet", async () => {
    const result = await run(
      { content: [text("Done.")] },
      { content: [text("Done.")] },
      { content: [text("Done.")] },
    );
    expect(result.reason).toBe("end_turn");
    expect(result.detail).toMatch(/^Finished with a check unmet: Before you finish/);
    expect(result.reports).toEqual({});
  });
});
