/**
 * Per-model prices (USD per million tokens) and context windows, from Anthropic's published
 * pricing and model overview pages as of 2026-11. Update this table when prices change.
 */
interface Rates {
  input: number;
  output: number;
  /** Writing a 5-minute cache entry. */
  cacheWrite5m: number;
  /** Writing a 1-hour cache entry. */
  cacheWrite1h: number;
  /** Cache hits and refreshes. */
  cacheRead: number;
}

export interface ModelInfo {
  contextWindow: number;
  rates: Rates;
  /** Some models bill a whole request at higher rates once its prompt passes a threshold. */
  longPrompt?: { thresholdTokens: number; rates: Rates };
}

function rates(
  input: number,
  output: number,
  cacheWrite5m: number,
  cacheWrite1h: number,
  cacheRead: number,
): Rates {
  return { input, output, cacheWrite5m, cacheWrite1h, cacheRead };
}

const M = 1_000_000;
const K200 = 200_000;

export const MODELS: Readonly<Record<string, ModelInfo>> = {
  "claude-fable-5-1": { contextWindow: M, rates: rates(10, 50, 12.5, 20, 0.25) },
  "claude-fable-5": { contextWindow: M, rates: rates(10, 50, 12.5, 20, 1) },
  "claude-opus-5-5": { contextWindow: M, rates: rates(4, 20, 5, 8, 0.2) },
  "claude-opus-5": { contextWindow: M, rates: rates(5, 25, 6.25, 10, 0.5) },
  "claude-opus-4-8": { contextWindow: M, rates: rates(5, 25, 6.25, 10, 0.5) },
  "claude-opus-4-7": { contextWindow: M, rates: rates(5, 25, 6.25, 10, 0.5) },
  "claude-opus-4-6": { contextWindow: M, rates: rates(5, 25, 6.25, 10, 0.5) },
  "claude-opus-4-5": { contextWindow: K200, rates: rates(5, 25, 6.25, 10, 0.5) },
  "claude-opus-4-1": { contextWindow: K200, rates: rates(15, 75, 18.75, 30, 1.5) },
  // Sonnet 5.5 cache reads went from $0.20 to $0.10 on 2026-10-07.
  "claude-sonnet-5-5": { contextWindow: M, rates: rates(2, 10, 2.5, 4, 0.1) },
  "claude-sonnet-5": { contextWindow: M, rates: rates(2, 10, 2.5, 4, 0.2) },
  "claude-sonnet-4-6": { contextWindow: M, rates: rates(3, 15, 3.75, 6, 0.3) },
  "claude-sonnet-4-5": { contextWindow: K200, rates: rates(3, 15, 3.75, 6, 0.3) },
  "claude-haiku-5-5": {
    contextWindow: M,
    rates: rates(0.1, 0.5, 0.125, 0.2, 0.01),
    longPrompt: { thresholdTokens: 100_000, rates: rates(0.5, 2.5, 0.625, 1, 0.05) },
  },
  "claude-haiku-4-5": { contextWindow: K200, rates: rates(1, 5, 1.25, 2, 0.1) },
};

export const DEFAULT_MODEL = "claude-sonnet-5-5";

/**
 * For a model missing from the table: the highest rates and the smallest window, so cost limits
 * trip early rather than late. Results priced this way are flagged `known: false`.
 */
export const FALLBACK_MODEL: ModelInfo = { contextWindow: K200, rates: rates(10, 50, 12.5, 20, 1) };

export interface ResolvedModel extends ModelInfo {
  /** The table key that matched, or the requested id when none did. */
  id: string;
  known: boolean;
}

/** Looks a model id up, accepting dated snapshots (`-20250929`) and the `[1m]` suffix. */
export function resolveModel(model: string): ResolvedModel {
  const base = model.replace(/\[1m\]$/, "").replace(/-\d{8}$/, "");
  const info = MODELS[base];
  return info ? { id: base, known: true, ...info } : { id: model, known: false, ...FALLBACK_MODEL };
}

/** Token counts as the Messages API reports them in `usage`. */
export interface TokenCounts {
  inputTokens: number;
  outputTokens: number;
  cacheCreationInputTokens: number;
  cacheReadInputTokens: number;
  /** Part of `cacheCreationInputTokens` written with the 1-hour TTL, when the API says. */
  cacheCreation1hInputTokens?: number;
}

/** The USD cost of one request. */
export function requestCost(model: ResolvedModel, tokens: TokenCounts): number {
  const prompt = tokens.inputTokens + tokens.cacheCreationInputTokens + tokens.cacheReadInputTokens;
  const r =
    model.longPrompt && prompt > model.longPrompt.thresholdTokens
      ? model.longPrompt.rates
      : model.rates;
  const write1h = Math.min(tokens.cacheCreation1hInputTokens ?? 0, tokens.cacheCreationInputTokens);
  const write5m = tokens.cacheCreationInputTokens - write1h;
  return (
    (tokens.inputTokens * r.input +
      tokens.outputTokens * r.output +
      write5m * r.cacheWrite5m +
      write1h * r.cacheWrite1h +
      tokens.cacheReadInputTokens * r.cacheRead) /
    M
  );
}
