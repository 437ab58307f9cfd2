import { vi } from "vitest";

/**
 * How many String.prototype.replace calls `fn` makes. Linear-time code in this project runs a
 * fixed list of non-backtracking patterns once each, so hostile-input tests assert this count
 * stays fixed whatever the input, instead of asserting wall-clock time on a shared machine.
 */
export function countReplaces(fn: () => void): number {
  let count = 0;
  const original = String.prototype.replace;
  const spy = vi.spyOn(String.prototype, "replace").mockImplementation(function (
    this: string,
    ...args: Parameters<typeof original>
  ) {
    count += 1;
    return original.apply(this, args);
  });
  try {
    fn();
  } finally {
    spy.mockRestore();
  }
  return count;
}
