/**
 * Node flags for a child process that runs the project's TypeScript: none where Node strips types
 * itself (22.18+, 24), tsx before that. Children inherit the run's compile cache (vitest.config.ts).
 */
export const TYPESCRIPT_FLAGS: string[] = process.features.typescript ? [] : ["--import", "tsx"];
