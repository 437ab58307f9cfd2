/**
 * The scripted 30-step run (lib/scripted-run.ts) on the `openai` provider, against the loopback
 * OpenAI-compatible fake, which reports `prompt_tokens_details.cached_tokens` as OpenAI's automatic
 * prefix caching would (the longest prefix an earlier request shared, in 128-token blocks from
 * 1,024). The loop keeps the prefix byte-stable, so nearly all of each prompt should be cached.
 * Then the loop's own time per step (wall time minus tool time) on each provider, interleaved
 * rounds, median: the OpenAI-compatible provider's overhead against Anthropic's.
 * Goals: cached share >= 90 %; overhead ratio <= 1.2.
 */
import type { AgentEvent } from "../src/agent/events.ts";
import { type RunAgentOptions, runAgent } from "../src/agent/loop.ts";
import { makeRepo } from "../test/agent/setup.ts";
import { startAnthropicFake } from "../test/helpers/anthropic-fake.ts";
import { startOpenAiFake } from "../test/helpers/openai-fake.ts";
import { actions, files, STEPS, scriptedRunOptions } from "./lib/scripted-run.ts";

const CACHE_GOAL = 0.9;
const OVERHEAD_GOAL = 1.2;
const ROUNDS = 5;

/** One run; resolves to the loop's own milliseconds per step and the fake's usage. */
async function scriptedRun(provider: "anthropic" | "openai") {
  const repo = await makeRepo(files);
  const anthropic = provider === "anthropic" ? await startAnthropicFake(actions()) : undefined;
  const compatible = provider === "openai" ? await startOpenAiFake() : undefined;
  compatible?.push(...actions());
  try {
    let toolMs = 0;
    const target: Partial<RunAgentOptions> = anthropic
      ? {
          model: "claude-sonnet-5-5",
          client: { apiKey: "bench", baseURL: anthropic.url, maxRetries: 0 },
        }
      : {
          model: "bench/gpt-5.1",
          providers: new Map([
            ["bench", { name: "bench", baseUrl: compatible?.url ?? "", prices: {}, stream: true }],
          ]),
          compatible: { maxRetries: 0 },
        };
    const started = performance.now();
    const result = await runAgent({
      ...(await scriptedRunOptions(repo.workspace)),
      onEvent: (event: AgentEvent) => {
        if (event.type === "tool_result") toolMs += event.durationMs ?? 0;
      },
      ...target,
    });
    const wall = performance.now() - started;
    const problems = [...(anthropic?.problems ?? []), ...(compatible?.problems ?? [])];
    if (result.reason !== "end_turn" || problems.length > 0) {
      throw new Error(
        `${provider} run did not complete: ${result.reason} ${result.error?.message ?? ""} ${problems.join("; ")}`,
      );
    }
    return { loopMsPerStep: (wall - toolMs) / STEPS, usages: compatible?.usages ?? [] };
  } finally {
    await anthropic?.close();
    await compatible?.close();
    await repo.cleanup();
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const first = await scriptedRun("openai");
const prompt = first.usages.reduce((sum, u) => sum + u.prompt, 0);
const cached = first.usages.reduce((sum, u) => sum + u.cached, 0);
const share = cached / prompt;
console.log(`openai-run: ${first.usages.length} steps, ${prompt} prompt tokens`);
console.log(
  `  cached_tokens ${cached} (${(share * 100).toFixed(1)} %), goal >= ${CACHE_GOAL * 100} %: ${share >= CACHE_GOAL ? "met" : "NOT MET"}`,
);

const times: Record<"anthropic" | "openai", number[]> = { anthropic: [], openai: [] };
for (let round = 0; round < ROUNDS; round++) {
  for (const provider of ["anthropic", "openai"] as const) {
    times[provider].push((await scriptedRun(provider)).loopMsPerStep);
  }
}
const anthropicMs = median(times.anthropic);
const openaiMs = median(times.openai);
const ratio = openaiMs / anthropicMs;
console.log(
  `  loop time per step (wall minus tools, fake server included), median of ${ROUNDS}: anthropic ${anthropicMs.toFixed(2)} ms, openai ${openaiMs.toFixed(2)} ms`,
);
console.log(
  `  ratio ${ratio.toFixed(2)}x, goal <= ${OVERHEAD_GOAL}x: ${ratio <= OVERHEAD_GOAL ? "met" : "NOT MET"}`,
);
process.exitCode = share >= CACHE_GOAL && ratio <= OVERHEAD_GOAL ? 0 : 1;
