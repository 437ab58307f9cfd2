/**
 * Prompt-cache share over a scripted 30-step run: the real agent loop, real tools on a temp git
 * repository, and the loopback Anthropic fake, which reports cache_read_input_tokens the way the API
 * would for the breakpoints each request carries (tokens ~ characters / 4, 1,024-token minimum).
 * Goal: at least 90 % of input tokens read from cache. Then the second look a job takes before its
 * pull request (src/jobs/run/second-look.ts): one more turn of the same conversation with the
 * run's diff, priced on its own.
 */
import { runAgent } from "../src/agent/loop.ts";
import { LOOK_STEPS, lookAt } from "../src/jobs/run/second-look.ts";
import { makeRepo } from "../test/agent/setup.ts";
import { PromptCache, startAnthropicFake, text } from "../test/helpers/anthropic-fake.ts";
import { actions, files, scriptedRunOptions } from "./lib/scripted-run.ts";

const GOAL = 0.9;

const repo = await makeRepo(files);
const startSha = (await repo.git("rev-parse", "HEAD")).trim();
const fake = await startAnthropicFake([...actions(), { content: [text("Nothing found.")] }], {
  minCacheTokens: 1024,
});
try {
  const started = performance.now();
  const options = {
    ...(await scriptedRunOptions(repo.workspace)),
    model: "claude-sonnet-5-5",
    client: { apiKey: "bench", baseURL: fake.url, maxRetries: 0 },
  };
  const result = await runAgent(options);
  const ms = performance.now() - started;
  if (result.reason !== "end_turn" || fake.problems.length > 0) {
    throw new Error(
      `the run did not complete: ${result.reason} ${result.error?.message ?? ""} ${fake.problems.join("; ")}`,
    );
  }

  const steps = [...fake.usages];
  const total = steps.reduce(
    (sum, u) => sum + u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
    0,
  );
  const read = steps.reduce((sum, u) => sum + u.cache_read_input_tokens, 0);
  const written = steps.reduce((sum, u) => sum + u.cache_creation_input_tokens, 0);
  const share = read / total;
  // The same requests with breakpoints only on tools and system: what the moving breakpoints buy.
  const staticOnly = new PromptCache(1024);
  let staticRead = 0;
  for (const { body } of fake.requests.slice(0, steps.length)) {
    const messages = JSON.parse(JSON.stringify(body.messages), (key, value) =>
      key === "cache_control" ? undefined : value,
    );
    staticRead += staticOnly.account({ ...body, messages }).cache_read_input_tokens;
  }
  console.log(`prompt-cache: ${steps.length} steps, ${total} input tokens`);
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

  // The second look: the request and the run's whole diff, after the cached conversation.
  const seen = await lookAt({
    workspace: repo.workspace,
    mirror: repo.root,
    startSha,
    request: options.instruction as string,
    steps: LOOK_STEPS,
  });
  if (!seen) throw new Error("the run changed nothing to look at");
  const look = await runAgent({
    ...options,
    messages: result.messages,
    instruction: seen.instruction,
  });
  const usage = fake.usages.at(-1);
  if (look.reason !== "end_turn" || !usage || fake.problems.length > 0) {
    throw new Error(`the second look did not complete: ${look.reason} ${fake.problems.join("; ")}`);
  }
  const lookInput =
    usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens;
  console.log(
    `  second look: 1 step, ${lookInput} input tokens (a ${seen.bytes}-byte diff), read from cache ${usage.cache_read_input_tokens} (${((usage.cache_read_input_tokens / lookInput) * 100).toFixed(1)} %), written ${usage.cache_creation_input_tokens}; cost $${look.usage.costUsd.toFixed(4)}, ${((look.usage.costUsd / result.usage.costUsd) * 100).toFixed(1)} % of the run's`,
  );
  process.exitCode = share >= GOAL ? 0 : 1;
} finally {
  await fake.close();
  await repo.cleanup();
}
