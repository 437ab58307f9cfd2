import type { Price } from "./providers.ts";

interface OpenAiModel {
  price: Price;
  contextWindow: number;
}

function model(input: number, output: number, cachedInput: number, contextWindow: number) {
  return { price: { input, output, cachedInput }, contextWindow };
}

/**
 * OpenAI's published prices (USD per million tokens) and context windows for the common models,
 * from its pricing page as of 2025-11; a provider's own `prices` override them. They apply to any
 * OpenAI-compatible provider serving a model under the same name (a LiteLLM proxy, say).
 */
export const OPENAI_MODELS: Readonly<Record<string, OpenAiModel>> = {
  "gpt-5.1": model(1.25, 10, 0.125, 400_000),
  "gpt-5": model(1.25, 10, 0.125, 400_000),
  "gpt-5-mini": model(0.25, 2, 0.025, 400_000),
  "gpt-5-nano": model(0.05, 0.4, 0.005, 400_000),
  "gpt-4.1": model(2, 8, 0.5, 1_047_576),
  "gpt-4.1-mini": model(0.4, 1.6, 0.1, 1_047_576),
  "gpt-4.1-nano": model(0.1, 0.4, 0.025, 1_047_576),
  "gpt-4o": model(2.5, 10, 1.25, 128_000),
  "gpt-4o-mini": model(0.15, 0.6, 0.075, 128_000),
  o3: model(2, 8, 0.5, 200_000),
  "o4-mini": model(1.1, 4.4, 0.275, 200_000),
};

/** What an OpenAI-compatible server's model is assumed to hold when nobody said. */
export const DEFAULT_COMPATIBLE_WINDOW = 128_000;
