// The agent step every job of a worker shares (the pipeline, a chat turn, a scheduled automation):
// the agent on the conversation's stored history with the worker's model clients and plugins,
// within the granted settings; a first attempt adds the new turn, one after a crash goes on from
// what the earlier attempt stored.
import type { AgentResult } from "../../agent/loop.ts";
import type { RepoSettings } from "../../config/repo-config.ts";
import { RESUME_INSTRUCTION } from "../kinds/issue/request.ts";
import type { PipelineDeps, Run } from "../kinds/issue/run.ts";
import { type JobAgentInput, runJobAgent } from "./agent.ts";
import { type LoadedConversation, resumes } from "./history.ts";

type Granted = { settings: RepoSettings; budgetUsd: number };

/** What the caller says; the rest comes from the deps, the run and the granted settings. */
type TurnInput = Omit<
  JobAgentInput,
  | keyof ReturnType<typeof agentRunDeps>
  | "db"
  | "history"
  | "storedCount"
  | "instruction"
  | "signal"
> & {
  history: LoadedConversation;
  /** The new user turn; asked for only when the attempt does not resume. */
  turn(): JobAgentInput["instruction"] | Promise<JobAgentInput["instruction"]>;
};

export async function runAgentTurn(
  deps: PipelineDeps,
  run: Run,
  granted: Granted,
  input: TurnInput,
): Promise<AgentResult> {
  const { history, turn, ...rest } = input;
  return runJobAgent({
    ...rest,
    db: deps.db.pool,
    history: history.messages,
    storedCount: history.storedCount,
    instruction: resumes(run.attempt, history) ? RESUME_INSTRUCTION : await turn(),
    ...agentRunDeps(deps, granted),
    signal: run.signal,
  });
}

/** What every agent run of a worker takes from its deps: plugins, model clients, logger, limits. */
function agentRunDeps(deps: PipelineDeps, granted: Granted) {
  return {
    settings: granted.settings,
    budgetUsd: granted.budgetUsd,
    maxWallTimeMs: deps.maxWallTimeMs ?? granted.settings.timeoutMinutes * 60_000,
    available: deps.plugins,
    anthropic: deps.anthropic,
    providers: deps.providers ?? new Map(),
    compatible: deps.compatible,
    streamRetryDelayMs: deps.streamRetryDelayMs,
    logger: deps.logger,
  };
}
