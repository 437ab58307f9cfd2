import { parseArgs } from "node:util";
import type { ProviderName } from "../workspace/types.ts";

export interface RunArgs {
  repo: string;
  task: string;
  branch?: string;
  provider: ProviderName;
  model?: string;
  maxSteps?: number;
  /** One JSON object per event on stdout; human-readable progress on stderr. */
  json: boolean;
  /** `-f FILE`, repeatable: attached as untrusted context. */
  files: string[];
}

/** A problem the user can fix; the CLI prints its message on one line and exits 2. */
export class UsageError extends Error {}

const usage =
  'usage: vmpilot run --repo <path-or-git-url> [--branch name] [--provider sandbox|host] [--model m] [--max-steps n] [--json] [-f FILE]... "task" (- reads it from stdin)';

export function parseRunArgs(argv: string[]): RunArgs {
  const [command, ...rest] = argv;
  if (command !== "run") throw new UsageError(usage);
  let parsed: ReturnType<typeof parseRunOptions>;
  try {
    parsed = parseRunOptions(rest);
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n${usage}`);
  }
  const { values, positionals } = parsed;
  const task = positionals.join(" ").trim();
  if (!values.repo) throw new UsageError(`missing --repo\n${usage}`);
  if (!task) throw new UsageError(`missing the task text\n${usage}`);
  const provider = values.provider ?? "sandbox";
  if (provider !== "sandbox" && provider !== "host") {
    throw new UsageError(`--provider must be sandbox or host, not "${provider}"`);
  }
  let maxSteps: number | undefined;
  if (values["max-steps"] !== undefined) {
    maxSteps = Number(values["max-steps"]);
    if (!Number.isInteger(maxSteps) || maxSteps < 1) {
      throw new UsageError(`--max-steps must be a positive integer, not "${values["max-steps"]}"`);
    }
  }
  return {
    repo: values.repo,
    task,
    branch: values.branch,
    provider,
    model: values.model,
    maxSteps,
    json: values.json === true,
    files: values.file ?? [],
  };
}

function parseRunOptions(args: string[]) {
  return parseArgs({
    args,
    allowPositionals: true,
    options: {
      repo: { type: "string" },
      branch: { type: "string" },
      provider: { type: "string" },
      model: { type: "string" },
      "max-steps": { type: "string" },
      json: { type: "boolean" },
      file: { type: "string", short: "f", multiple: true },
    },
  });
}
