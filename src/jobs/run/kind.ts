// A kind of job (kinds/<kind>/) is what differs between jobs: which rows are its, who it acts for,
// how it reports and what its work is. The runner (runner.ts) does what every kind does alike, in
// one order: read the job, skip it if finished, the one gate, the settings resolved once and the
// budget reserved, running, the work, the end; the retry rule and the workspace's disposal once.
// claude-code-action's modes are the model: a registry (kinds/index.ts) of kinds, each with its
// own detector (claims).
import type { ProbotOctokit } from "probot";
import type { RepoSettings } from "../../config/repo-config.ts";
import type { RepoConfigLoad } from "../../github/repo-config-loader.ts";
import type { ConversationOwner } from "../../store/api-conversations.ts";
import type { Job } from "../../store/jobs.ts";
import type { AgentRun, JobRun } from "./agent.ts";
import type { JobDeps, OpenDeps, Run } from "./deps.ts";
import type { GateResult, Starter } from "./gate.ts";
import type { JobProgress } from "./progress.ts";
import type { Granted, SettingsRefusal } from "./settings.ts";
import type { OpenWorkspace } from "./workspace.ts";

/** How a job ended, for the worker's metric; a job's final status where it sets one. */
export type Outcome =
  | "succeeded"
  | "failed"
  | "refused"
  | "cancelled"
  | "ignored"
  | "answered"
  | "acknowledged"
  | "skipped";

/** Why a job the intake let through is not wanted after all: ignored, or refused with a reason. */
export type Unwanted = { ignored: string } | { refused: string };

/** The job ended before its work. */
export interface Ended {
  ended: Outcome;
}

/** The repository a job is on, with a client of its installation. */
interface JobRepository {
  id: number;
  owner: string;
  name: string;
  installationId: number;
  octokit: ProbotOctokit;
}

/** The repository a job on one stands on, with a client of its installation. */
export async function repositoryOf(
  deps: Pick<OpenDeps, "auth">,
  job: { repositoryId: number; installationId: number },
  names: { owner: string; name: string },
): Promise<JobRepository> {
  const octokit = await deps.auth(job.installationId);
  const { repositoryId: id, installationId } = job;
  return { id, owner: names.owner, name: names.name, installationId, octokit };
}

/** Where a job stands: its repository, or a scratch workspace of its owner's, and whom it acts for. */
export type Place = { starter: Starter } & (
  | { repository: JobRepository }
  | { repository: null; owner: ConversationOwner }
);

export interface Admitting {
  run: Run;
  deps: OpenDeps;
  place: Place;
  /** The repository's settings the gate decides on, read when first asked for (triggerSettings). */
  settings(): Promise<RepoSettings>;
}

export interface Admitted extends Admitting {
  gate: GateResult;
  /** The file as read now, for the settings the work runs with; none on scratch. */
  fresh: Promise<RepoConfigLoad> | undefined;
}

/** One attempt's way out: where it reports, and how each way it can end is said. */
export interface Attempt {
  progress: JobProgress;
  /** The settings refused the work: an invalid file, vmpilot turned off, a budget spent. */
  limited(refusal: SettingsRefusal): Promise<Outcome>;
  cancelled(): Promise<Outcome>;
  failed(reason: string): Promise<Outcome>;
  /** Another attempt follows: say so where the job reports. */
  retrying(attempt: number): Promise<void>;
}

/** What the work gets from the runner: the settings, and the one way to a workspace and a model. */
export interface Working extends Admitted {
  deps: JobDeps;
  granted: Granted;
  /** Opens the job's workspace; the runner disposes of it however the job ends. */
  workspace: OpenWorkspace;
  /**
   * Runs the model on the job's conversation within the granted settings, or hands over the run an
   * earlier attempt of the job finished and kept, its work back in the workspace (kept.ts). A
   * cancelled run throws: the runner ends the job as cancelled, so a kind never asks.
   */
  agent(run: AgentRun): Promise<JobRun>;
}

export interface JobKind<J extends Job = Job, A extends Attempt = Attempt> {
  readonly name: string;
  /** Whom a refusal of its budget speaks to: the person at a chat client, or of the requester. */
  readonly told: "requester" | "you";
  /** The gate waits for the file as it is now, rather than deciding on what it said when last read. */
  readonly freshGate: boolean;
  /** Whether a job row is of this kind. */
  claims(job: Job): job is J;
  /** The job's repository and whom it acts for; `refused` when neither can be told any more. */
  place(job: J, deps: OpenDeps): Promise<Place | { refused: string }>;
  /** Why the job is not wanted after all (checked before the gate, on the settings as known). */
  unwanted?(job: J, ctx: Admitting): Promise<Unwanted | undefined>;
  /** The gate said no, or the job's place could not be told: end the job, said its way. */
  refused(
    job: J,
    ctx: { run: Run; deps: OpenDeps },
    why: GateResult | { refused: string },
  ): Promise<Outcome>;
  /** The first visible answer, and where the attempt reports; may end the job at once. */
  open(job: J, ctx: Admitted): Promise<A | Ended>;
  work(job: J, attempt: A, ctx: Working): Promise<Outcome>;
}
