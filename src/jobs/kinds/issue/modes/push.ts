// The modes that push the agent's work to the job's branch and open or update its pull request:
// fix (the issue, or what was asked), threads (a pull request's unresolved review threads,
// answered once the work is pushed, and the lessons the review teaches proposed: lessons.ts) and
// ci (the checks that failed on vmpilot's last push).
import { listUnresolvedThreads } from "../../../../github/review-threads.ts";
import type { PipelineOutcome } from "../attempt.ts";
import { ciFailures } from "../ci.ts";
import { citableComments, learn, lessonPlugin } from "../lessons.ts";
import { fixBody } from "../outcome.ts";
import { type ModeJob, onPushed, type PipelineMode, type Ran } from "./mode.ts";

const STEPS = ["acknowledged", "workspace", "agent", "tests", "pushed"] as const;

async function finishPush(job: ModeJob, { ws, result, extras }: Ran): Promise<PipelineOutcome> {
  const { attempt } = job;
  const learned = await learn(job, result);
  const body = await fixBody({
    work: job,
    attempt,
    conversation: job.conversation,
    request: job.request,
    target: job.target,
    ws,
    result,
    threads: extras.threads ?? [],
    notes: [...(extras.ci ? [extras.ci.note] : []), ...(learned ? [learned] : [])],
    onPushed: onPushed(job, result),
  });
  return attempt.end("succeeded", body);
}

export const fix: PipelineMode = {
  steps: [...STEPS, "pull_request"],
  pushes: true,
  readsItem: true,
  runsSetup: true,
  finish: finishPush,
};

export const threads: PipelineMode = {
  steps: STEPS,
  pushes: true,
  readsItem: true,
  runsSetup: true,
  async prepare(job) {
    const { attempt, target, request, granted } = job;
    const found =
      target.prNumber === null
        ? []
        : await listUnresolvedThreads(attempt.octokit, {
            ...attempt.item,
            number: target.prNumber,
          });
    if (found.length === 0 && !request.request.trim()) {
      const text = "There are no unresolved review threads.";
      return { ended: await attempt.notice("succeeded", "ℹ️", "Nothing to do", text) };
    }
    // A review of vmpilot's own pull request may teach it lessons; one of a person's may not.
    const citable = citableComments(job, found);
    const learns = granted.settings.memory.enabled && !target.served && citable.size > 0;
    return { threads: found, ...(learns && { plugins: [lessonPlugin(citable)] }) };
  },
  finish: finishPush,
};

export const ci: PipelineMode = {
  steps: STEPS,
  pushes: true,
  // Told what failed instead; people's new comments start jobs of their own.
  readsItem: false,
  runsSetup: true,
  // Read before the workspace opens: the model's first request carries it.
  prepare: async ({ attempt, run }) => ({ ci: await ciFailures(attempt, run.signal) }),
  finish: finishPush,
};
