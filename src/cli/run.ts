import { loadSandboxLimits } from "../config/env.ts";
import { loadMcpSecrets, loadMcpServers } from "../config/mcp.ts";
import { routeModel } from "../config/model-route.ts";
import { DEFAULT_MODEL } from "../config/models.ts";
import { loadProviders } from "../config/providers.ts";
import type { SandboxLimits } from "../workspace/index.ts";
import { type InvocationArgs, type RunArgs, UsageError } from "./args.ts";
import { readAttachments, taskFromStdin, withAttachments } from "./attachments.ts";
import { type ConversationStart, Invocation, type InvocationOptions } from "./invocation.ts";
import type { ProgressOutput } from "./progress.ts";
import { cliDataDir } from "./store.ts";

export interface CliIo {
  /** Standard input when it is read (see readsStdin): the task (`-`) or an attachment. */
  stdin?: AsyncIterable<Buffer | string>;
  stdout: ProgressOutput;
  /** With --json, where the human-readable progress goes. */
  stderr: ProgressOutput;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal;
}

/** What every command that runs the agent checks first. */
export function invocationOptions(
  args: InvocationArgs,
  env: NodeJS.ProcessEnv,
  human: ProgressOutput,
): InvocationOptions {
  const loaded = loadProviders(env);
  if ("problems" in loaded) throw new UsageError(loaded.problems.join("; "));
  let route: ReturnType<typeof routeModel>;
  try {
    route = routeModel(args.model ?? env.VMPILOT_MODEL ?? DEFAULT_MODEL, loaded.providers);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (route.provider === "anthropic" && !env.ANTHROPIC_API_KEY && !env.ANTHROPIC_AUTH_TOKEN) {
    throw new UsageError("ANTHROPIC_API_KEY is not set: export your Anthropic API key first");
  }
  const sandbox = loadSandboxLimits(env);
  if ("problems" in sandbox) throw new UsageError(sandbox.problems.join("; "));
  const limits: SandboxLimits = sandbox.limits;
  const secrets = loadMcpSecrets(env);
  if ("problems" in secrets) throw new UsageError(secrets.problems.join("; "));
  const servers = loadMcpServers(env, secrets.secrets);
  if ("problems" in servers) throw new UsageError(servers.problems.join("; "));
  if (args.warning) human.write(`vmpilot: ${args.warning}\n`);
  return {
    env,
    dataDir: cliDataDir(env),
    repo: args.repo,
    workspace: args.workspace,
    model: args.model ?? env.VMPILOT_MODEL,
    providers: loaded.providers,
    maxSteps: args.maxSteps,
    branch: args.branch,
    limits,
    mcp: { secrets: secrets.secrets, servers: servers.servers },
    human,
  };
}

export function conversationStart(args: InvocationArgs, firstTask: string): ConversationStart {
  if (args.conversationId !== undefined) return { conversationId: args.conversationId };
  return args.continueLatest ? { continue: true } : { firstTask };
}

/** Runs one task (one turn of a new or continued conversation); resolves to the exit code. */
export async function runTask(given: RunArgs, io: CliIo): Promise<number> {
  const human = given.json ? io.stderr : io.stdout;
  const options = invocationOptions(given, io.env, human);
  const fromStdin = given.task === "-";
  const task = fromStdin ? await taskFromStdin(io.stdin) : given.task;
  const attachments = await readAttachments(given.files, fromStdin ? undefined : io.stdin);
  const invocation = await Invocation.open(
    { ...options, ...(given.json && { json: io.stdout }) },
    conversationStart(given, task),
  );
  try {
    return await invocation.turn(withAttachments(task, attachments), io.signal, true);
  } finally {
    await invocation.close();
  }
}
