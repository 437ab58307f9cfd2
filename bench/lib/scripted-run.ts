// The scripted 30-step working run the prompt-cache benchmarks replay on each provider.
import type { RunAgentOptions } from "../../src/agent/loop.ts";
import {
  DEFAULT_ENABLED_PLUGINS,
  discoverPlugins,
  selectPlugins,
} from "../../src/agent/plugins.ts";
import { buildSystemPrompt } from "../../src/agent/prompt.ts";
import type { Workspace } from "../../src/workspace/types.ts";
import type { FakeStep } from "../../test/helpers/anthropic-fake.ts";
import { text, toolUse } from "../../test/helpers/anthropic-fake.ts";

export const STEPS = 30;

const SCRIPTED_TASK = "Make every itemN_7 function accept a missing stock argument.";

/** The run's options but for the model: plugins (not testing), system prompt and instruction. */
export async function scriptedRunOptions(workspace: Workspace): Promise<RunAgentOptions> {
  const plugins = selectPlugins(
    await discoverPlugins(),
    DEFAULT_ENABLED_PLUGINS.filter((p) => p !== "testing"),
  );
  const system = await buildSystemPrompt({ workspace, task: SCRIPTED_TASK, plugins });
  return { workspace, system, plugins, instruction: "Please make the change and run the tests." };
}

export const files: Record<string, string> = {
  "README.md": "# inventory\n\nA small inventory service.\n\nRun `sh test.sh` to test.\n",
  "AGENTS.md":
    "Keep functions small. Tests live next to the code. Run `sh test.sh` before finishing.\n",
  "test.sh": 'for f in src/*.js; do node --check "$f" || exit 1; done\necho all good\n',
};
for (let i = 0; i < 12; i++) {
  files[`src/module${i}.js`] = Array.from(
    { length: 40 },
    (_, line) =>
      `export function item${i}_${line}(stock) { return stock.filter((s) => s.qty > ${line}); }`,
  ).join("\n");
}

/** A typical working run: explore, read, edit, test, repeat. */
export function actions(): FakeStep[] {
  const steps: FakeStep[] = [];
  for (let step = 0; step < STEPS - 1; step++) {
    const module = `src/module${step % 12}.js`;
    const pick = step % 5;
    const call =
      pick === 0
        ? toolUse("bash", { command: "ls -la src && git log --oneline | head" })
        : pick === 1
          ? toolUse("str_replace_based_edit_tool", {
              command: "view",
              path: module,
              view_range: [1, 15],
            })
          : pick === 2
            ? toolUse("bash", { command: `grep -n "qty > 3" ${module}` })
            : pick === 3
              ? toolUse("str_replace_based_edit_tool", {
                  command: "str_replace",
                  path: module,
                  old_str: `item${step % 12}_7(stock)`,
                  new_str: `item${step % 12}_7(stock = [])`,
                })
              : toolUse("bash", { command: "sh test.sh" });
    steps.push({ content: [text(`Step ${step + 1}: continuing with ${module}.`), call] });
  }
  steps.push({ content: [text("Done: defaulted the stock argument and the tests pass.")] });
  return steps;
}
