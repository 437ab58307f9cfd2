// A CI fix's two ends: what failed, read from GitHub before the model starts, and what a push of
// vmpilot's own branch leaves for later (the head to watch, and the check for a review).
import type { RepoSettings } from "../../../config/repo-config.ts";
import { gatherCiFailures, renderCiFailures } from "../../../github/ci-failures.ts";
import { recordPush } from "../../../store/ci-loop.ts";
import { CiFailuresFound } from "../../../store/job-event-kinds.ts";
import type { Queryable } from "../../../store/sql.ts";
import type { Queue } from "../../queue/queue.ts";
import { type JobRun, testsOf } from "../../run/agent.ts";
import type { IssueAttempt } from "./attempt.ts";

export interface CiFailures {
  sha: string;
  /** Fenced, for the model. */
  failures: string;
  /** One line for the progress comment: what failed. */
  note: string;
}

export async function ciFailures(attempt: IssueAttempt, signal: AbortSignal): Promise<CiFailures> {
  const sha = attempt.context.headSha;
  if (!sha) throw new Error(`CI fix job ${attempt.job.id} names no head commit`);
  const found = await gatherCiFailures(
    attempt.octokit,
    { owner: attempt.context.owner, repo: attempt.context.name, sha },
    signal,
  );
  const names = found.map((f) => `\`${f.name.replaceAll("`", "'")}\``).join(", ");
  attempt.progress.log(CiFailuresFound, { sha, failed: found.map((f) => f.name) });
  return {
    sha,
    failures: renderCiFailures(found),
    note: `Checks that failed on ${sha.slice(0, 10)}: ${names || "none listed any more"}.`,
  };
}

/**
 * Remembers the head vmpilot pushed, and when its tests passed, queues the check that marks the
 * pull request ready for review once no check suite showed up within the grace time.
 */
export async function afterPush(
  db: Queryable,
  queue: Pick<Queue, "enqueueReady"> | undefined,
  push: {
    conversationId: number;
    jobId: number;
    sha: string;
    settings: RepoSettings;
    result: JobRun;
  },
): Promise<void> {
  await recordPush(db, push.conversationId, push.sha, push.jobId);
  if (!queue || !push.settings.readyForReview) return;
  if (testsOf(push.result)?.outcome !== "passed") return;
  await queue.enqueueReady(
    { conversationId: push.conversationId, sha: push.sha, grace: true },
    { delaySeconds: push.settings.ci.graceMinutes * 60 },
  );
}
