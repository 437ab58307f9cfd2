import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Several suites spawn bwrap, git and database servers; two cores are the budget.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
