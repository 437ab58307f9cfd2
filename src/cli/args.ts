import { type ParseArgsOptionsConfig, parseArgs } from "node:util";
import {
  DEFAULT_WORKSPACE,
  ENGINES,
  fromOldProvider,
  ISOLATIONS,
  mismatch,
  OLD_PROVIDERS,
  type WorkspaceChoice,
} from "../config/workspace.ts";

/** One of `names`, or a UsageError naming them. */
function oneOf<T extends string>(names: readonly T[], value: string, flag: string): T {
  const found = names.find((name) => name === value);
  if (found === undefined) {
    throw new UsageError(`${flag} must be one of ${names.join(", ")}, not "${value}"`);
  }
  return found;
}

/** What `run` and `chat` share: where, how, and which conversation. */
export interface InvocationArgs {
  /** Optional only with --conversation: the conversation knows its repository. */
  repo?: string;
  branch?: string;
  /** --isolation and --engine, or what the old --provider meant. */
  workspace: WorkspaceChoice;
  /** Said once before the run or chat starts: the new flags for an old one. */
  warning?: string;
  model?: string;
  maxSteps?: number;
  /** --continue: the repository's latest conversation. */
  continueLatest: boolean;
  /** --conversation <id>: that conversation. */
  conversationId?: number;
}

/** Whether `run` reads standard input: when it is a pipe, a socket or a file (--stdin, --no-stdin). */
export type StdinChoice = "detect" | "read" | "skip";

export interface RunArgs extends InvocationArgs {
  task: string;
  /** One JSON object per event on stdout; human-readable progress on stderr. */
  json: boolean;
  /** `-f FILE`, repeatable: attached as untrusted context. */
  files: string[];
  stdin: StdinChoice;
}

export type CliCommand =
  | { command: "run"; args: RunArgs }
  | { command: "chat"; args: InvocationArgs }
  | { command: "conversations"; repo: string };

/** A problem the user can fix; the CLI prints its message on one line and exits 2. */
export class UsageError extends Error {}

const usage = `usage:
  vmpilot run --repo <path-or-git-url> [--continue | --conversation id] [--branch name] [--isolation none|sandbox|vm] [--engine local|fly|kubernetes] [--model m] [--max-steps n] [--json] [-f FILE]... [--stdin | --no-stdin] "task" (- reads it from stdin)
  vmpilot chat --repo <path-or-git-url> [--continue | --conversation id] [--isolation none|sandbox|vm] [--engine local|fly|kubernetes] [--model m] [--max-steps n]
  vmpilot conversations --repo <path-or-git-url>`;

const invocationOptions = {
  repo: { type: "string" },
  branch: { type: "string" },
  isolation: { type: "string" },
  engine: { type: "string" },
  provider: { type: "string" },
  model: { type: "string" },
  "max-steps": { type: "string" },
  continue: { type: "boolean" },
  conversation: { type: "string" },
} as const;

const runOptions = {
  ...invocationOptions,
  json: { type: "boolean" },
  file: { type: "string", short: "f", multiple: true },
  stdin: { type: "boolean" },
  "no-stdin": { type: "boolean" },
} as const;

function parse<T extends ParseArgsOptionsConfig>(args: string[], options: T) {
  try {
    return parseArgs({ args, allowPositionals: true, options });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n${usage}`);
  }
}

function positiveInteger(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1) {
    throw new UsageError(`${flag} must be a positive integer, not "${value}"`);
  }
  return number;
}

function invocationArgs(values: {
  repo?: string;
  branch?: string;
  isolation?: string;
  engine?: string;
  provider?: string;
  model?: string;
  "max-steps"?: string;
  continue?: boolean;
  conversation?: string;
}): InvocationArgs {
  const conversationId = positiveInteger(values.conversation, "--conversation");
  const continueLatest = values.continue === true;
  if (continueLatest && conversationId !== undefined) {
    throw new UsageError(
      "--continue and --conversation pick a conversation each: give one of them",
    );
  }
  if (!values.repo && conversationId === undefined)
    throw new UsageError(`missing --repo\n${usage}`);
  if (values.branch && (continueLatest || conversationId !== undefined)) {
    throw new UsageError("--branch names a new conversation's branch: a continued one has its own");
  }
  return {
    repo: values.repo,
    branch: values.branch,
    ...workspaceArgs(values),
    model: values.model,
    maxSteps: positiveInteger(values["max-steps"], "--max-steps"),
    continueLatest,
    conversationId,
  };
}

/** --isolation and --engine; the old --provider, which named both at once, with a warning. */
function workspaceArgs(values: { isolation?: string; engine?: string; provider?: string }) {
  if (values.provider !== undefined) {
    if (values.isolation !== undefined || values.engine !== undefined) {
      throw new UsageError("--isolation and --engine replace --provider: give only them");
    }
    const workspace = fromOldProvider(oneOf(OLD_PROVIDERS, values.provider, "--provider"));
    const warning = `--provider ${values.provider} is read as --isolation ${workspace.isolation} --engine ${workspace.engine}: give those instead (--provider will go)`;
    return { workspace, warning };
  }
  const workspace = {
    isolation: oneOf(ISOLATIONS, values.isolation ?? DEFAULT_WORKSPACE.isolation, "--isolation"),
    engine: oneOf(ENGINES, values.engine ?? DEFAULT_WORKSPACE.engine, "--engine"),
  };
  const unfit = mismatch(workspace);
  if (unfit)
    throw new UsageError(
      `--isolation ${workspace.isolation} --engine ${workspace.engine}: ${unfit}`,
    );
  return { workspace };
}

export function parseCommand(argv: string[]): CliCommand {
  const [command, ...rest] = argv;
  if (command === "run") {
    const { values, positionals } = parse(rest, runOptions);
    const common = invocationArgs(values);
    const task = positionals.join(" ").trim();
    if (!task) throw new UsageError(`missing the task text\n${usage}`);
    if (values.stdin && values["no-stdin"]) {
      throw new UsageError("--stdin and --no-stdin contradict each other: give one of them");
    }
    const stdin = values.stdin ? "read" : values["no-stdin"] ? "skip" : "detect";
    if (task === "-" && stdin === "skip") {
      throw new UsageError("the task - is read from standard input, which --no-stdin turns off");
    }
    return {
      command,
      args: { ...common, task, json: values.json === true, files: values.file ?? [], stdin },
    };
  }
  if (command === "chat") {
    const { values, positionals } = parse(rest, invocationOptions);
    if (positionals.length > 0) {
      throw new UsageError(
        `vmpilot chat reads its turns from the terminal, not the command line\n${usage}`,
      );
    }
    return { command, args: invocationArgs(values) };
  }
  if (command === "conversations") {
    const { values } = parse(rest, { repo: { type: "string" } } as const);
    if (!values.repo) throw new UsageError(`missing --repo\n${usage}`);
    return { command, repo: values.repo };
  }
  throw new UsageError(usage);
}
