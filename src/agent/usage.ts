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
export function pricedUsage(model: ResolvedModel, tokens: TokenCounts): UsageTotals {
  return { cacheCreation1hInputTokens: 0, ...tokens, costUsd: requestCost(model, tokens) };
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
