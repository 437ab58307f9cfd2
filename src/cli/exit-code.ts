import type { AgentResult } from "../agent/loop.ts";

/** Documented in the README: 0 done, 1 the task failed, 2 usage or configuration, 3 a limit. */
export const EXIT = { done: 0, failed: 1, usage: 2, limit: 3 } as const;

const LIMITS = new Set<AgentResult["reason"]>(["max_steps", "max_wall_time", "max_cost"]);

/** The exit code of a run that got as far as the agent. */
export function exitCodeOf(result: AgentResult, testOutcome: string | undefined): number {
  if (LIMITS.has(result.reason)) return EXIT.limit;
  if (result.reason !== "end_turn" || testOutcome === "failed") return EXIT.failed;
  return EXIT.done;
}
