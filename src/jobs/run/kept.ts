// An agent run that finished is kept before anything of it leaves the worker: what delivery reads
// of its result, and the workspace's work as a bundle (turn-bundle.ts), in kept_runs. An attempt
// redone after that (a push or a pull request GitHub refused, a comment it would not take, the
// worker stopping) delivers the kept run instead of paying the model for it again, and reserves no
// budget (settings.ts). Its workspace gets the kept work back, on the commit the run began from (or
// on a branch the job creates, whatever the default branch moved to); a branch that holds the work
// already, pushed before the attempt failed, is used as it is. A branch someone moved since is
// never pushed over: the job fails, saying so. The row goes when the job finishes (025_kept_runs.sql).
import type { AgentResult } from "../../agent/loop.ts";
import { PermanentError } from "../../errors.ts";
import { KeptRunTaken } from "../../store/job-event-kinds.ts";
import { type KeptRun, keepRun } from "../../store/kept-runs.ts";
import { restoreRunWork, saveRunWork } from "../../workspace/git/turn-bundle.ts";
import type { Checkout, Workspace } from "../../workspace/index.ts";
import type { JobDeps, Run } from "./deps.ts";
import type { JobProgress } from "./progress.ts";
import type { JobWorkspace } from "./workspace.ts";

/**
 * Keeps a run that ended on its own (what the kinds deliver) for the job's next attempt. A run that
 * cannot be kept (its work over the bundle's cap, say) is delivered all the same: only a redo of
 * this attempt would pay again.
 */
export async function keep(
  deps: Pick<JobDeps, "db" | "logger">,
  run: Run,
  workspace: Workspace,
  baseSha: string,
  result: AgentResult,
): Promise<void> {
  const { reason } = result;
  if (reason === "error" || reason === "cancelled" || run.signal.aborted) return;
  try {
    const bundle = await saveRunWork(workspace, baseSha);
    const kept = { ...result, reason };
    await keepRun(deps.db.pool, {
      jobId: run.jobId,
      attempt: run.attempt,
      result: kept,
      baseSha,
      bundle,
    });
  } catch (error) {
    deps.logger.warn({ err: error, jobId: run.jobId }, "keeping the agent's run failed");
  }
}

class BranchMoved extends PermanentError {
  override name = "BranchMoved";
}

/** The kept run, its work put back in the workspace or found on the branch already. */
export async function takeUp(
  kept: KeptRun,
  ws: JobWorkspace<Checkout | null>,
  progress: Pick<JobProgress, "log">,
): Promise<KeptRun["result"]> {
  let how = "it changed no file";
  if (kept.bundle) {
    const run = { bundle: kept.bundle, baseSha: kept.baseSha };
    // A branch the job creates has nothing on it to lose.
    const placed = await restoreRunWork(ws.workspace, run, ws.remoteSha === null);
    if (placed === "moved") {
      throw new BranchMoved(
        `the branch moved since attempt ${kept.attempt} ran the agent; its kept work is not put over what is there now`,
      );
    }
    if (placed === "held") ws.from = kept.baseSha;
    how = placed === "held" ? "the branch holds its work already" : "its work is restored";
  }
  progress.log(KeptRunTaken, {
    attempt: kept.attempt,
    message: `The agent's run of attempt ${kept.attempt} was kept: ${how}, and the model is not run again.`,
  });
  return kept.result;
}
