import { describe, expect, it } from "vitest";
import { requestCost, resolveModel } from "../../src/config/models.ts";

const tokens = (input: number, output: number, write = 0, read = 0, write1h = 0) => ({
  inputTokens: input,
  outputTokens: output,
  cacheCreationInputTokens: write,
  cacheReadInputTokens: read,
  cacheCreation1hInputTokens: write1h,
});

describe("price table", () => {
  it("resolves dated snapshots and the 1M-context suffix to the base model", () => {
    expect(resolveModel("claude-sonnet-4-5-20250929")).toMatchObject({
      id: "claude-sonnet-4-5",
      known: true,
      contextWindow: 200_000,
    });
    expect(resolveModel("claude-opus-5-5[1m]")).toMatchObject({
      id: "claude-opus-5-5",
      known: true,
      contextWindow: 1_000_000,
    });
  });

  it("prices input, output, 5-minute and 1-hour cache writes, and cache reads", () => {
    const opus = resolveModel("claude-opus-5-5");
    // $4 in, $20 out, $5 5m write, $8 1h write, $0.20 read per MTok.
    expect(requestCost(opus, tokens(1_000_000, 0))).toBeCloseTo(4, 10);
    expect(requestCost(opus, tokens(0, 1_000_000))).toBeCloseTo(20, 10);
    expect(requestCost(opus, tokens(0, 0, 1_000_000))).toBeCloseTo(5, 10);
    expect(requestCost(opus, tokens(0, 0, 1_000_000, 0, 250_000))).toBeCloseTo(
      0.75 * 5 + 0.25 * 8,
      10,
    );
    expect(requestCost(opus, tokens(0, 0, 0, 1_000_000))).toBeCloseTo(0.2, 10);
  });

  it("bills a whole long-prompt request at the higher tier where the model has one", () => {
    const haiku = resolveModel("claude-haiku-5-5");
    expect(requestCost(haiku, tokens(50_000, 1_000, 0, 50_000))).toBeCloseTo(
      (50_000 * 0.1 + 1_000 * 0.5 + 50_000 * 0.01) / 1e6,
      12,
    );
    expect(requestCost(haiku, tokens(50_000, 1_000, 0, 50_001))).toBeCloseTo(
      (50_000 * 0.5 + 1_000 * 2.5 + 50_001 * 0.05) / 1e6,
      12,
    );
  });

  it("falls back to the highest rates, flagged, for an unknown model", () => {
    const unknown = resolveModel("claude-next-1");
    expect(unknown).toMatchObject({ id: "claude-next-1", known: false, contextWindow: 200_000 });
    expect(requestCost(unknown, tokens(1_000_000, 1_000_000))).toBeCloseTo(60, 10);
  });
});
