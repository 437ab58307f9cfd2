// A mode is what a job was asked to do (request.ts tells which). run.ts does what every mode does
// alike (gather, target, workspace, agent); a mode says what differs: the steps its progress
// comment shows, whether it pushes, what it reads for the model before the workspace opens, and
// how it ends once the agent has run.
import type { Plugin } from "../../../../agent/plugins.ts";
import type { IssueContext } from "../../../../github/issue-context.ts";
import type { ProgressStep } from "../../../../github/progress-comment.ts";
import type { ReviewThread } from "../../../../github/review-threads.ts";
import type { Conversation } from "../../../../store/conversations.ts";
import type { Workspace } from "../../../../workspace/types.ts";
import type { JobRun } from "../../../run/agent.ts";
import type { JobDeps, Run } from "../../../run/deps.ts";
import type { LoadedConversation } from "../../../run/history.ts";
import type { Place } from "../../../run/kind.ts";
import type { Granted } from "../../../run/settings.ts";
import type { JobWorkspace } from "../../../run/workspace.ts";
import type { IssueAttempt, PipelineOutcome } from "../attempt.ts";
import { afterPush, type CiFailures } from "../ci.ts";
import type { MergeStart } from "../merge.ts";
import type { WorkRequest } from "../request.ts";
import type { Target } from "../target.ts";

/** A job with its target chosen: what a mode has to work with. */
export interface ModeJob {
  run: Run;
  deps: JobDeps;
  place: Place;
  attempt: IssueAttempt;
  request: WorkRequest;
  /** The settings the job runs with, and the most this attempt may spend. */
  granted: Granted;
  conversation: Conversation;
  history: LoadedConversation;
  /** The conversation has seen the item before: only new comments are shown. */
  itemSeen: boolean;
  issue: IssueContext;
  target: Extract<Target, { ok: true }>;
  /** The automation whose run this is, on the issue that started it. */
  automation: string | undefined;
}

/** What a mode tells the model besides the request (see instructionFor), and keeps for its end. */
export interface ModeExtras {
  threads?: readonly ReviewThread[];
  ci?: CiFailures;
  merge?: MergeStart;
  labels?: readonly string[];
  /** Tools of this mode's runs alone (triage's apply_labels). */
  plugins?: readonly Plugin[];
  /** A fix on a fork's pull request (suggest.ts): its base's commit, and its files to instruct with. */
  suggesting?: { base: string; instructions: Pick<Workspace, "readFile"> };
}

/** The job ended before its agent ran (nothing to do), with this status. */
export interface Ended {
  ended: PipelineOutcome;
}

export interface Ran {
  ws: JobWorkspace;
  result: JobRun;
  extras: ModeExtras;
}

export interface PipelineMode {
  /** The steps its progress comment shows, in order. */
  steps: readonly ProgressStep[];
  /**
   * Pushes the agent's work to the target branch, which the job records: refused on a fork's
   * pull request. (A merge pushes only its merge commit, to the pull request's own branch.)
   */
  pushes: boolean;
  /**
   * Shows the model the issue or pull request: its text, the comments new to the conversation, and
   * a pull request's diff the first time. Without it the model gets only the title.
   */
  readsItem: boolean;
  /** The pull request's diff every time, even when the conversation has seen it. */
  readsDiff?: boolean;
  /** Runs the repository's setup commands in the workspace. */
  runsSetup: boolean;
  /** Before the workspace opens: what the model is told besides the request. */
  prepare?(job: ModeJob): Promise<ModeExtras | Ended>;
  /** Once the workspace is open, before the agent runs; adds to what prepare found. */
  inWorkspace?(job: ModeJob, ws: JobWorkspace): Promise<ModeExtras | Ended>;
  /** After a run that ended on its own: what it leaves behind, and the final comment. */
  finish(job: ModeJob, ran: Ran): Promise<PipelineOutcome>;
}

/** After vmpilot's own push: the head its CI fixes and ready-for-review check watch. */
export function onPushed(job: ModeJob, result: JobRun) {
  return (sha: string) =>
    afterPush(job.deps.db.pool, job.deps.readyQueue, {
      conversationId: job.conversation.id,
      jobId: job.attempt.job.id,
      sha,
      settings: job.granted.settings,
      result,
    });
}
