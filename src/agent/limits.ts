import type { FinishReason } from "./events.ts";

export interface AgentLimits {
  /** Model requests; default 200. */
  maxSteps?: number;
  maxWallTimeMs?: number;
  maxCostUsd?: number;
}

const DEFAULT_MAX_STEPS = 200;

export interface RunProgress {
  steps: number;
  startedAt: number;
  costUsd: number;
  /** False when cost comes from fallback prices. */
  priceKnown: boolean;
  cancelled: boolean;
}

export function remainingMs(limits: AgentLimits, startedAt: number): number {
  return (limits.maxWallTimeMs ?? Number.POSITIVE_INFINITY) - (Date.now() - startedAt);
}

/** The first limit the run has reached, with a sentence for the report. */
export function limitReached(
  limits: AgentLimits,
  run: RunProgress,
): { reason: FinishReason; detail: string } | undefined {
  const maxSteps = limits.maxSteps ?? DEFAULT_MAX_STEPS;
  if (run.cancelled) return { reason: "cancelled", detail: "The run was cancelled." };
  if (run.steps >= maxSteps) {
    return { reason: "max_steps", detail: `Stopped after ${run.steps} steps (limit ${maxSteps}).` };
  }
  if (remainingMs(limits, run.startedAt) <= 0) {
    const seconds = (ms: number) => Math.round(ms / 1000);
    return {
      reason: "max_wall_time",
      detail: `Stopped after ${seconds(Date.now() - run.startedAt)} s (limit ${seconds(limits.maxWallTimeMs ?? 0)} s).`,
    };
  }
  if (limits.maxCostUsd !== undefined && run.costUsd >= limits.maxCostUsd) {
    const fallback = run.priceKnown
      ? ""
      : " (fallback prices: the model is not in the price table)";
    return {
      reason: "max_cost",
      detail: `Stopped at $${run.costUsd.toFixed(4)}, over the $${limits.maxCostUsd.toFixed(2)} limit${fallback}.`,
    };
  }
  return undefined;
}
