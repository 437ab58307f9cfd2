import { describe, expect, it } from "vitest";
import { createBatcher } from "../../src/intake/batcher.ts";

/** A run function whose batches finish only when the test says so. */
function controlled() {
  const batches: number[][] = [];
  const releases: Array<() => void> = [];
  let started: (() => void) | undefined;
  const run = (items: number[]) => {
    batches.push(items);
    started?.();
    return new Promise<number[]>((resolve, reject) => {
      releases.push(() =>
        items.includes(-1) ? reject(new Error("bad item")) : resolve(items.map((i) => i * 10)),
      );
    });
  };
  return {
    run,
    batches,
    release: () => releases.shift()?.(),
    /** Resolves when the next batch starts. */
    nextBatch: () =>
      new Promise<void>((resolve) => {
        started = resolve;
      }),
  };
}

describe("createBatcher", () => {
  it("runs an item at once when idle and groups the ones that arrive meanwhile", async () => {
    const { run, batches, release, nextBatch } = controlled();
    const add = createBatcher(run, { maxSize: 3, maxInFlight: 1 });
    const results = [1, 2, 3, 4, 5, 6].map(add);
    expect(batches).toEqual([[1]]);
    let started = nextBatch();
    release();
    await started;
    expect(batches).toEqual([[1], [2, 3, 4]]);
    started = nextBatch();
    release();
    await started;
    release();
    expect(await Promise.all(results)).toEqual([10, 20, 30, 40, 50, 60]);
    expect(batches).toEqual([[1], [2, 3, 4], [5, 6]]);
  });

  it("keeps several batches in flight", () => {
    const { run, batches } = controlled();
    const add = createBatcher(run, { maxSize: 10, maxInFlight: 2 });
    for (const i of [1, 2, 3, 4]) void add(i);
    expect(batches).toEqual([[1], [2]]);
  });

  it("retries a failed batch item by item, so only the bad item fails", async () => {
    const calls: number[][] = [];
    const add = createBatcher(
      async (items: number[]) => {
        calls.push(items);
        if (items.includes(-1)) throw new Error("bad item");
        return items.map((i) => i * 10);
      },
      { maxSize: 10, maxInFlight: 1 },
    );
    const first = add(0);
    const rest = [1, -1, 2].map(add);
    await first;
    const settled = await Promise.allSettled(rest);
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(calls).toEqual([[0], [1, -1, 2], [1], [-1], [2]]);
  });
});
