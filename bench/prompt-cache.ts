/**
 * Prompt-cache share over a scripted 30-turn session: the real agent loop, real tools on a temp git
 * repository, and the loopback Anthropic fake, which reports cache_read_input_tokens the way the API
 * would for the breakpoints each request carries (tokens ~ characters / 4, 1,024-token minimum).
 * Goal: at least 90 % of input tokens read from cache.
 */
import { runAgent } from "../src/agent/loop.ts";
import { DEFAULT_ENABLED_PLUGINS, discoverPlugins, selectPlugins } from "../src/agent/plugins.ts";
import { buildSystemPrompt } from "../src/agent/prompt.ts";
import { makeRepo } from "../test/agent/setup.ts";
import {
  type FakeStep,
  PromptCache,
  startAnthropicFake,
  text,
  toolUse,
} from "../test/helpers/anthropic-fake.ts";

const TURNS = 30;
const GOAL = 0.9;

const files: Record<string, string> = {
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

// A typical working session: explore, read, edit, test, repeat.
function actions(): FakeStep[] {
  const steps: FakeStep[] = [];
  for (let turn = 0; turn < TURNS - 1; turn++) {
    const module = `src/module${turn % 12}.js`;
    const pick = turn % 5;
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
                  old_str: `item${turn % 12}_7(stock)`,
                  new_str: `item${turn % 12}_7(stock = [])`,
                })
              : toolUse("bash", { command: "sh test.sh" });
    steps.push({ content: [text(`Step ${turn + 1}: continuing with ${module}.`), call] });
  }
  steps.push({ content: [text("Done: defaulted the stock argument and the tests pass.")] });
  return steps;
}

const repo = await makeRepo(files);
const fake = await startAnthropicFake(actions(), { minCacheTokens: 1024 });
try {
  const plugins = selectPlugins(
    await discoverPlugins(),
    DEFAULT_ENABLED_PLUGINS.filter((p) => p !== "testing"),
  );
  const system = await buildSystemPrompt({
    workspace: repo.workspace,
    task: "Make every itemN_7 function accept a missing stock argument.",
    plugins,
  });
  const started = performance.now();
  const result = await runAgent({
    workspace: repo.workspace,
    system,
    plugins,
    instruction: "Please make the change and run the tests.",
    model: "claude-sonnet-5-5",
    client: { apiKey: "bench", baseURL: fake.url, maxRetries: 0 },
  });
  const ms = performance.now() - started;
  if (result.reason !== "end_turn" || fake.problems.length > 0) {
    throw new Error(
      `session did not complete: ${result.reason} ${result.error?.message ?? ""} ${fake.problems.join("; ")}`,
    );
  }

  const total = fake.usages.reduce(
    (sum, u) => sum + u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
    0,
  );
  const read = fake.usages.reduce((sum, u) => sum + u.cache_read_input_tokens, 0);
  const written = fake.usages.reduce((sum, u) => sum + u.cache_creation_input_tokens, 0);
  const share = read / total;
  // The same requests with breakpoints only on tools and system: what the moving breakpoints buy.
  const staticOnly = new PromptCache(1024);
  let staticRead = 0;
  for (const { body } of fake.requests) {
    const messages = JSON.parse(JSON.stringify(body.messages), (key, value) =>
      key === "cache_control" ? undefined : value,
    );
    staticRead += staticOnly.account({ ...body, messages }).cache_read_input_tokens;
  }
  console.log(`prompt-cache: ${fake.usages.length} turns, ${total} input tokens`);
  console.log(
    `  read from cache ${read} (${(share * 100).toFixed(1)} %), written ${written}, uncached ${total - read - written}`,
  );
  const first = fake.requests[0]?.body;
  const prefix = Math.ceil(JSON.stringify([first.tools, first.system]).length / 4);
  console.log(
    `  with breakpoints on tools and system only (a ~${prefix}-token prefix; 1,024 minimum), it would be ${((staticRead / total) * 100).toFixed(1)} %`,
  );
  console.log(
    `  cost $${result.usage.costUsd.toFixed(4)} on claude-sonnet-5-5, loop wall time ${ms.toFixed(0)} ms`,
  );
  console.log(`  goal >= ${GOAL * 100} %: ${share >= GOAL ? "met" : "NOT MET"}`);
  process.exitCode = share >= GOAL ? 0 : 1;
} finally {
  await fake.close();
  await repo.cleanup();
}
