import "../node-version.ts";
import { SandboxUnavailableError } from "../workspace/index.ts";
import { parseRunArgs, type RunArgs, UsageError } from "./args.ts";
import { pipedStdin } from "./attachments.ts";
import { EXIT } from "./exit-code.ts";
import { runTask } from "./run.ts";

// Problems the user can fix are reported in one line with exit code 2; anything else is a bug
// or an outage and keeps its stack.
async function main(): Promise<number> {
  let args: RunArgs;
  try {
    args = parseRunArgs(process.argv.slice(2));
    const abort = new AbortController();
    process.once("SIGINT", () => abort.abort());
    return await runTask(args, {
      stdin: pipedStdin(),
      stdout: process.stdout,
      stderr: process.stderr,
      env: process.env,
      signal: abort.signal,
    });
  } catch (error) {
    if (error instanceof UsageError || error instanceof SandboxUnavailableError) {
      process.stderr.write(`vmpilot: ${error.message}\n`);
      return EXIT.usage;
    }
    throw error;
  }
}

process.exitCode = await main();
