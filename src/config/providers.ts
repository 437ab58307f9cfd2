// OpenAI-compatible model servers the operator configured in the environment. Anthropic is always
// there (ANTHROPIC_API_KEY, as the SDK reads it); these are the others.
import { z } from "zod";

const price = z
  .object({
    input: z.number().min(0),
    output: z.number().min(0),
    cachedInput: z.number().min(0).optional(),
  })
  .strict();

/** USD per million tokens. */
export type Price = z.infer<typeof price>;

const entry = z
  .object({
    baseUrl: z.url({ protocol: /^https?$/ }),
    apiKey: z.string().min(1).optional(),
    /** Per model id (without the provider prefix). */
    prices: z.record(z.string(), price).optional(),
    /** For models not in `prices`; { "input": 0, "output": 0 } for a server you run yourself. */
    defaultPrice: price.optional(),
    contextWindow: z.number().int().min(1000).optional(),
    reasoningEffort: z.enum(["minimal", "low", "medium", "high"]).optional(),
    /** Some servers cannot stream tool calls; false asks for whole replies. */
    stream: z.boolean().optional(),
    /** The models take images (attached screenshots); without it they are told one was left out. */
    vision: z.boolean().optional(),
  })
  .strict();

export interface OpenAiCompatible {
  name: string;
  baseUrl: string;
  apiKey?: string;
  prices: Readonly<Record<string, Price>>;
  defaultPrice?: Price;
  contextWindow?: number;
  reasoningEffort?: "minimal" | "low" | "medium" | "high";
  stream: boolean;
  /** The models take images; default false. */
  vision?: boolean;
}

/** By name, the prefix of the model ids they serve (`ollama/qwen3-coder:30b`). */
export type ProviderTable = ReadonlyMap<string, OpenAiCompatible>;

const NAME = /^[a-z][a-z0-9-]{0,30}$/;

const FREE: Price = { input: 0, output: 0 };

function builtIns(env: Readonly<Record<string, string | undefined>>): OpenAiCompatible[] {
  const found: OpenAiCompatible[] = [];
  if (env.OPENAI_API_KEY || env.OPENAI_BASE_URL) {
    found.push({
      name: "openai",
      baseUrl: env.OPENAI_BASE_URL || "https://api.openai.com/v1",
      apiKey: env.OPENAI_API_KEY || undefined,
      prices: {},
      stream: true,
      // OpenAI's current chat models all take images.
      vision: true,
    });
  }
  if (env.OPENROUTER_API_KEY) {
    found.push({
      name: "openrouter",
      baseUrl: "https://openrouter.ai/api/v1",
      apiKey: env.OPENROUTER_API_KEY,
      prices: {},
      stream: true,
      // Many of its models are text-only, and it refuses a request with an image for those.
      vision: false,
    });
  }
  if (env.OLLAMA_BASE_URL) {
    // Your own GPUs: no key, and no bill per token.
    found.push({
      name: "ollama",
      baseUrl: env.OLLAMA_BASE_URL,
      prices: {},
      defaultPrice: FREE,
      stream: true,
    });
  }
  return found;
}

/**
 * OPENAI_API_KEY / OPENAI_BASE_URL, OPENROUTER_API_KEY and OLLAMA_BASE_URL configure the built-in
 * providers; VMPILOT_PROVIDERS (a JSON object of name → { baseUrl, apiKey, prices, defaultPrice,
 * contextWindow, reasoningEffort, stream, vision }) adds providers or replaces a built-in one.
 */
export function loadProviders(
  env: Readonly<Record<string, string | undefined>>,
): { providers: ProviderTable } | { problems: string[] } {
  const problems: string[] = [];
  const table = new Map(builtIns(env).map((p) => [p.name, p]));
  for (const variable of ["OPENAI_BASE_URL", "OLLAMA_BASE_URL"] as const) {
    const value = env[variable];
    if (value && !z.url({ protocol: /^https?$/ }).safeParse(value).success) {
      problems.push(`${variable}: must be an http(s) URL such as http://gpu-box:11434/v1`);
    }
  }
  const json = env.VMPILOT_PROVIDERS?.trim();
  if (json) {
    let value: unknown;
    try {
      value = JSON.parse(json);
    } catch {
      return { problems: [...problems, "VMPILOT_PROVIDERS: is not valid JSON"] };
    }
    const parsed = z.record(z.string(), entry).safeParse(value);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
      return { problems: [...problems, `VMPILOT_PROVIDERS: ${issues.join("; ")}`] };
    }
    for (const [name, settings] of Object.entries(parsed.data)) {
      if (!NAME.test(name) || name === "anthropic") {
        problems.push(
          `VMPILOT_PROVIDERS: "${name}" must be a lowercase name such as gpu-box, not anthropic`,
        );
        continue;
      }
      table.set(name, {
        name,
        baseUrl: settings.baseUrl,
        apiKey: settings.apiKey,
        prices: settings.prices ?? {},
        defaultPrice: settings.defaultPrice,
        contextWindow: settings.contextWindow,
        reasoningEffort: settings.reasoningEffort,
        stream: settings.stream ?? true,
        vision: settings.vision ?? false,
      });
    }
  }
  return problems.length > 0 ? { problems } : { providers: table };
}
