import type { FailureCode } from "./events.ts";

export interface DescribedError {
  code: FailureCode;
  message: string;
}

/** A run failure the loop itself detects (as opposed to an API error). */
export class AgentFailure extends Error {
  readonly code: FailureCode;
  constructor(code: FailureCode, message: string) {
    super(message);
    this.code = code;
    this.name = "AgentFailure";
  }
}

export function afterRetries(retries: number): string {
  return `after ${retries} ${retries === 1 ? "retry" : "retries"}`;
}

/** One clear line for why a run failed: the loop's own failures, then the provider's errors. */
export function describeError(
  error: unknown,
  provider: { describeError(error: unknown): DescribedError | undefined },
): DescribedError {
  if (error instanceof AgentFailure) return { code: error.code, message: error.message };
  return (
    provider.describeError(error) ?? {
      code: "internal",
      message: error instanceof Error ? error.message : String(error),
    }
  );
}
