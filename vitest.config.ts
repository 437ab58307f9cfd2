import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // A bound for hangs, not a speed check: on a loaded 2-core machine a test that starts the CLI
    // (a cold TypeScript start, a sandbox, git) was seen taking 30 s once, 10 s alone.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Several suites spawn bwrap, git and database servers; two cores are the budget.
    maxWorkers: 2,
    fileParallelism: true,
  },
});
