// The one runner every job goes through, whatever its kind (kind.ts says what a kind adds): read
// the job and skip it if finished; the one gate; the first answer; the settings resolved once and
// the budget reserved; running; the work; the end. The retry rule is here once: an attempt that
// fails for a reason that can pass (GitHub or git unreachable) asks the queue for another, never
// on the last attempt. Safe to run again after a crash: every kind ends by finding what an earlier
// attempt left (its comment, its conversation, its pull request), and an attempt after one whose
// agent finished delivers that run, kept, without running the model again (kept.ts).
import { defaults, type RepoSettings } from "../../config/repo-config.ts";
import { isPermanent, PermanentError } from "../../errors.ts";
import type { RepoConfigLoad } from "../../github/repo-config-loader.ts";
import { annotate } from "../../log/trace.ts";
import { getJob, type Job, updateJob } from "../../store/jobs.ts";
import { getKeptRun, type KeptRun } from "../../store/kept-runs.ts";
import type { Checkout } from "../../workspace/index.ts";
import { runJobAgent } from "./agent.ts";
import type { JobDeps, OpenDeps, Run, WorkDeps } from "./deps.ts";
import { gate } from "./gate.ts";
import type { Admitted, Admitting, Attempt, JobKind, Outcome, Working } from "./kind.ts";
import type { Granted } from "./settings.ts";
import { type BudgetScope, grant, triggerSettings } from "./settings.ts";
import {
  type CheckoutSpec,
  type JobWorkspace,
  type OpenWorkspace,
  openWorkspace,
  type WorkspaceSpec,
} from "./workspace.ts";

export async function runJob(
  kinds: readonly JobKind[],
  run: Run,
  deps: OpenDeps,
  /** Without it, a job ends once answered: the intake's tests run the worker that way. */
  work: WorkDeps | undefined,
): Promise<Outcome> {
  const job = await getJob(deps.db.pool, run.jobId);
  if (!job || job.finishedAt) return "skipped";
  const kind = kinds.find((candidate) => candidate.claims(job));
  if (!kind) throw new PermanentError(`job ${job.id} is of no kind this worker runs`);
  annotate({ "vmpilot.job.kind": kind.name, "vmpilot.repository": job.repo });
  return runKind(kind, job, run, deps, work);
}

async function runKind<J extends Job, A extends Attempt>(
  kind: JobKind<J, A>,
  job: J,
  run: Run,
  deps: OpenDeps,
  work: WorkDeps | undefined,
): Promise<Outcome> {
  const place = await kind.place(job, deps);
  if ("refused" in place) return kind.refused(job, { run, deps }, place);
  const repository = place.repository;
  let known: ReturnType<typeof triggerSettings> | undefined;
  const read = () => {
    if (!repository)
      return Promise.resolve({ settings: deps.defaults ?? defaults, fresh: undefined });
    known ??= triggerSettings(
      deps.db.pool,
      repository.octokit,
      repository,
      deps.defaults,
      kind.freshGate,
    );
    return known;
  };
  // The file's read, once started, is settled before the job ends, however it ends: what it
  // stores for the intake is there, and nothing of this job is still asking GitHub afterwards.
  const settled = () => known?.then((k) => k.fresh).catch(() => undefined);
  try {
    return await admitAndWork(
      kind,
      job,
      { run, deps, place, settings: async () => (await read()).settings },
      read,
      work,
    );
  } finally {
    await settled();
  }
}

async function admitAndWork<J extends Job, A extends Attempt>(
  kind: JobKind<J, A>,
  job: J,
  admitting: Admitting,
  read: () => Promise<{ settings: RepoSettings; fresh: Promise<RepoConfigLoad> | undefined }>,
  work: WorkDeps | undefined,
): Promise<Outcome> {
  const { run, deps, place } = admitting;
  const repository = place.repository;
  const unwanted = await kind.unwanted?.(job, admitting);
  if (unwanted && "refused" in unwanted) {
    deps.logger.info({ jobId: job.id, why: unwanted.refused }, "refused");
    await updateJob(deps.db.pool, job.id, { status: "refused", error: unwanted.refused });
    return "refused";
  }
  if (unwanted) {
    deps.logger.info({ jobId: job.id, why: unwanted.ignored }, "ignored");
    await updateJob(deps.db.pool, job.id, { status: "ignored" });
    return "ignored";
  }
  const { settings, fresh } = await read();
  const admitted: Admitted = {
    ...admitting,
    fresh,
    gate: await gate(place.starter, repository ?? undefined, settings, deps.allowedUsers),
  };
  run.signal.throwIfAborted();
  if (!admitted.gate.allowed) return kind.refused(job, admitted, admitted.gate);
  const opened = await kind.open(job, admitted);
  if ("ended" in opened) return opened.ended;
  if (!work) {
    opened.progress.stop();
    return "acknowledged";
  }
  return attempt(kind, job, opened, { ...admitted, deps: { ...deps, ...work } });
}

async function attempt<J extends Job, A extends Attempt>(
  kind: JobKind<J, A>,
  job: J,
  opened: A,
  admitted: Admitted & { deps: JobDeps },
): Promise<Outcome> {
  const { run, deps, place } = admitted;
  const workspaces: JobWorkspace<Checkout | null>[] = [];
  await updateJob(deps.db.pool, job.id, { status: "running" });
  try {
    const scope: BudgetScope = place.repository
      ? { repositoryId: place.repository.id }
      : { scratchOwner: place.owner };
    const kept = await getKeptRun(deps.db.pool, job.id);
    const granted = await grant(deps, job, scope, admitted.fresh, kind.told, { spends: !kept });
    if (!("budgetUsd" in granted)) return await opened.limited(granted);
    const working: Working = {
      ...admitted,
      granted,
      workspace: opener(deps, run, granted, opened, workspaces, kept),
      async agent(asked) {
        const progress = opened.progress;
        const result = await runJobAgent(deps, run, job, granted, kept, { ...asked, progress });
        // A cancelled run ends the job as cancelled (below), whatever its kind would do next.
        run.signal.throwIfAborted();
        return result;
      },
    };
    return await kind.work(job, opened, working);
  } catch (error) {
    if (run.signal.aborted) return opened.cancelled();
    deps.logger.warn({ err: error, jobId: job.id, attempt: run.attempt }, `${kind.name} failed`);
    if (!isPermanent(error) && run.attempt < run.maxAttempts) {
      await opened.retrying(run.attempt);
      throw error;
    }
    return opened.failed(error instanceof Error ? error.message : String(error));
  } finally {
    opened.progress.stop();
    await Promise.all(workspaces.map((ws) => ws.dispose()));
  }
}

/**
 * The kind's way to its workspaces, each held for disposal. One that only delivers a kept run runs
 * no setup commands: nothing runs in it but git.
 */
function opener(
  deps: JobDeps,
  run: Run,
  granted: Granted,
  opened: Attempt,
  workspaces: JobWorkspace<Checkout | null>[],
  kept: KeptRun | undefined,
): OpenWorkspace {
  function open(spec: CheckoutSpec): Promise<JobWorkspace>;
  function open(spec: WorkspaceSpec): Promise<JobWorkspace<Checkout | null>>;
  async function open(asked: WorkspaceSpec) {
    const spec = kept && "setup" in asked ? { ...asked, setup: false } : asked;
    const ws = await openWorkspace(deps, run, granted.settings, spec, opened.progress);
    workspaces.push(ws);
    return ws;
  }
  return open;
}
