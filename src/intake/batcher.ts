// Group commit: requests that arrive while earlier ones are being written share the next
// transaction. Under load a transaction carries many deliveries, so the database round trips per
// delivery shrink; an idle server writes each delivery at once, alone.

export interface BatcherOptions {
  /** Most items in one batch. */
  maxSize: number;
  /** Batches running at once (each holds a database connection). */
  maxInFlight: number;
}

interface Entry<I, O> {
  item: I;
  resolve(result: O): void;
  reject(error: unknown): void;
}

/**
 * Returns a function that hands items to `run` in batches and resolves each with its own result
 * (`run` returns results in item order). When a batch fails, its items are retried one by one, so
 * one bad item fails alone.
 */
export function createBatcher<I, O>(
  run: (items: I[]) => Promise<O[]>,
  options: BatcherOptions,
): (item: I) => Promise<O> {
  const waiting: Entry<I, O>[] = [];
  let inFlight = 0;

  async function settle(batch: Entry<I, O>[]): Promise<void> {
    try {
      const results = await run(batch.map((entry) => entry.item));
      for (const [i, entry] of batch.entries()) entry.resolve(results[i] as O);
    } catch (error) {
      const [only] = batch;
      if (batch.length === 1 && only) {
        only.reject(error);
        return;
      }
      for (const entry of batch) await settle([entry]);
    }
  }

  function pump(): void {
    while (inFlight < options.maxInFlight && waiting.length > 0) {
      const batch = waiting.splice(0, options.maxSize);
      inFlight++;
      settle(batch).finally(() => {
        inFlight--;
        pump();
      });
    }
  }

  return (item) =>
    new Promise<O>((resolve, reject) => {
      waiting.push({ item, resolve, reject });
      pump();
    });
}
