import { SandboxUnavailableError } from "../workspace/index.ts";
import { parseCommand, UsageError } from "./args.ts";
import { readsStdin } from "./attachments.ts";
import { EXIT } from "./exit-code.ts";
import { listConversations } from "./list-conversations.ts";
import { runRepl } from "./repl.ts";
import { runTask } from "./run.ts";
import { terminalText } from "./terminal-text.ts";

function dispatch(): Promise<number> {
  const command = parseCommand(process.argv.slice(2));
  const { env, stdout, stderr, stdin } = process;
  if (command.command === "conversations") return listConversations(command.repo, { stdout, env });
  if (command.command === "chat") {
    return runRepl(command.args, {
      input: stdin,
      output: stdout,
      env,
      onInterrupt: (handler) => process.on("SIGINT", handler),
    });
  }
  const abort = new AbortController();
  process.once("SIGINT", () => abort.abort());
  const input = readsStdin(command.args.stdin) ? stdin : undefined;
  return runTask(command.args, { stdin: input, stdout, stderr, env, signal: abort.signal });
}

// Problems the user can fix are reported in one line with exit code 2; anything else is a bug
// or an outage and keeps its stack.
async function main(): Promise<number> {
  try {
    return await dispatch();
  } catch (error) {
    if (error instanceof UsageError || error instanceof SandboxUnavailableError) {
      process.stderr.write(`vmpilot: ${terminalText(error.message)}\n`);
      return EXIT.usage;
    }
    throw error;
  }
}

process.exitCode = await main();
