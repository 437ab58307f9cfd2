// What every fuzz property shares: a fixed seed, so a failure in the suite replays, and a small
// share of runs. bench/fuzz.ts runs the same properties longer (FUZZ_SCALE) from a fresh seed
// (FUZZ_SEED), which fast-check prints with any counterexample.
import { createContext, Script } from "node:vm";

const scale = Number(process.env.FUZZ_SCALE ?? 1);
const seed = Number(process.env.FUZZ_SEED ?? 2026);

export function runs(numRuns: number) {
  return { seed, numRuns: Math.ceil(numRuns * scale) };
}

const context = createContext({ run: () => {} });
const call = new Script("run()");

/**
 * Runs a synchronous property run, interrupted if it takes longer than `limitMs` in all: a parser
 * that hangs (an alias bomb, a regex that backtracks) fails the test naming the input it was on,
 * instead of blocking the suite. One watchdog for the whole run: one per call costs ~1 ms.
 */
export function withoutHang<T>(limitMs: number, check: (track: (input: T) => void) => void) {
  let current: { input: T } | undefined;
  context.run = () =>
    check((input) => {
      current = { input };
    });
  try {
    call.runInContext(context, { timeout: limitMs * scale });
  } catch (error) {
    if ((error as { code?: unknown }).code !== "ERR_SCRIPT_EXECUTION_TIMEOUT") throw error;
    throw new Error(`no answer within ${limitMs * scale} ms for ${JSON.stringify(current?.input)}`);
  }
}
