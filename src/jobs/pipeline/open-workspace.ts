// How a worker's job on a repository opens its workspace: the worker's provider, pool and limits,
// the repository's isolation, network and setup, each setup command logged as the job's progress.
import type { RepoSettings } from "../../config/repo-config.ts";
import { SPARE_REPOSITORIES } from "../../workspace/git/spares.ts";
import { workspaceFor } from "../../workspace/isolation.ts";
import type { JobProgress } from "./progress.ts";
import type { PipelineDeps, Run } from "./run.ts";
import { type JobWorkspace, openJobWorkspace } from "./workspace.ts";

export async function openWorkspace(
  deps: PipelineDeps,
  run: Run,
  input: {
    job: { id: number; installationId: number };
    settings: RepoSettings;
    cloneUrl: string;
    branch: string;
    defaultBranch: string;
    /** Runs the repository's setup commands; false skips them. */
    setup: boolean;
    progress: Pick<JobProgress, "log">;
  },
): Promise<JobWorkspace> {
  const { job, settings, progress } = input;
  // Before the token: a repository asking for an isolation this worker lacks needs none.
  const workspace = workspaceFor(deps.workspace, settings.isolation);
  const token = await deps.installationToken(job.installationId);
  return openJobWorkspace({
    dataDir: deps.dataDir,
    workspace,
    spareCheckouts: deps.spareCheckouts ?? SPARE_REPOSITORIES,
    pool: deps.vmPool,
    jobId: job.id,
    attempt: run.attempt,
    cloneUrl: input.cloneUrl,
    auth: { token },
    branch: input.branch,
    defaultBranch: input.defaultBranch,
    allowHosts: settings.network.allow,
    allowPrivate: deps.allowPrivate ?? [],
    limits: deps.sandboxLimits,
    setup: input.setup ? settings.setup : [],
    signal: run.signal,
    logger: deps.logger,
    onSetupStep: (step) =>
      progress.log("setup", {
        message: `\`${step.command}\` exited ${step.result.exitCode}`,
        output: `${step.result.fullStdout}\n${step.result.fullStderr}`.slice(-20_000),
      }),
  });
}
