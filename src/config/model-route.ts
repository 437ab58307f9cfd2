// Which provider serves a model id, and what the model costs there.
import { PermanentError } from "../errors.ts";
import { FALLBACK_MODEL, type ResolvedModel, resolveModel } from "./models.ts";
import { DEFAULT_COMPATIBLE_WINDOW, OPENAI_MODELS } from "./openai-models.ts";
import type { OpenAiCompatible, Price, ProviderTable } from "./providers.ts";

export type ModelRoute =
  | { provider: "anthropic"; model: ResolvedModel }
  | { provider: OpenAiCompatible; model: ResolvedModel };

/** A model id whose provider the operator did not configure. Another attempt fails the same way. */
class ModelProviderMissing extends PermanentError {
  constructor(id: string, prefix: string, providers: ProviderTable) {
    const configured = ["anthropic", ...providers.keys()].join(", ");
    super(
      `the model ${id} is served by "${prefix}", which is not configured (configured: ${configured}); see the README's model providers`,
    );
    this.name = "ModelProviderMissing";
  }
}

function priced(id: string, price: Price, contextWindow: number): ResolvedModel {
  const cached = price.cachedInput ?? price.input;
  return {
    id,
    known: true,
    contextWindow,
    // No cache writes on these APIs: a prompt is billed as input, its cached part as cachedInput.
    rates: {
      input: price.input,
      output: price.output,
      cacheWrite5m: price.input,
      cacheWrite1h: price.input,
      cacheRead: cached,
    },
  };
}

function compatibleModel(provider: OpenAiCompatible, id: string): ResolvedModel {
  const listed = OPENAI_MODELS[id];
  const window = provider.contextWindow ?? listed?.contextWindow ?? DEFAULT_COMPATIBLE_WINDOW;
  const price = provider.prices[id] ?? listed?.price ?? provider.defaultPrice;
  if (price) return priced(id, price, window);
  // Unknown: the fallback prices keep budgets working, and the run says its cost is an estimate.
  return { ...FALLBACK_MODEL, id, known: false, contextWindow: window };
}

/**
 * `claude-…` or `anthropic/claude-…` → Anthropic; `<provider>/<model>` → that OpenAI-compatible
 * provider (`openai/gpt-5.1`, `ollama/qwen3-coder:30b`, `openrouter/qwen/qwen3-coder`).
 */
export function routeModel(id: string, providers: ProviderTable): ModelRoute {
  const slash = id.indexOf("/");
  if (slash < 0) return { provider: "anthropic", model: resolveModel(id) };
  const prefix = id.slice(0, slash);
  const name = id.slice(slash + 1);
  if (prefix === "anthropic") return { provider: "anthropic", model: resolveModel(name) };
  const provider = providers.get(prefix);
  if (!provider) throw new ModelProviderMissing(id, prefix, providers);
  return { provider, model: compatibleModel(provider, name) };
}
