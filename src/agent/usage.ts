import type Anthropic from "@anthropic-ai/sdk";
import { type ResolvedModel, requestCost, type TokenCounts } from "../config/models.ts";

export interface UsageTotals extends TokenCounts {
  costUsd: number;
}

export function emptyUsage(): UsageTotals {
  return {
    inputTokens: 0,
    outputTokens: 0,
    cacheCreationInputTokens: 0,
    cacheReadInputTokens: 0,
    cacheCreation1hInputTokens: 0,
    costUsd: 0,
  };
}

/** One response's usage, priced. */
export function turnUsage(model: ResolvedModel, usage: Anthropic.Usage): UsageTotals {
  const tokens: TokenCounts = {
    inputTokens: usage.input_tokens,
    outputTokens: usage.output_tokens,
    cacheCreationInputTokens: usage.cache_creation_input_tokens ?? 0,
    cacheReadInputTokens: usage.cache_read_input_tokens ?? 0,
    cacheCreation1hInputTokens: usage.cache_creation?.ephemeral_1h_input_tokens ?? 0,
  };
  return { ...tokens, costUsd: requestCost(model, tokens) };
}

export function addUsage(a: UsageTotals, b: UsageTotals): UsageTotals {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cacheCreationInputTokens: a.cacheCreationInputTokens + b.cacheCreationInputTokens,
    cacheReadInputTokens: a.cacheReadInputTokens + b.cacheReadInputTokens,
    cacheCreation1hInputTokens:
      (a.cacheCreation1hInputTokens ?? 0) + (b.cacheCreation1hInputTokens ?? 0),
    costUsd: a.costUsd + b.costUsd,
  };
}

/** Everything the model read for one request: the size of the context it was given. */
export function promptTokens(usage: TokenCounts): number {
  return usage.inputTokens + usage.cacheCreationInputTokens + usage.cacheReadInputTokens;
}
