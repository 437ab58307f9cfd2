// An issue job's work, once the runner admitted it and granted its settings: what it asks and its
// conversation (gather.ts), the branch (target.ts), the workspace, the agent, then what its mode
// does with the run (modes/: push and open a pull request, post a plan or a review...), with the
// progress comment kept up to date all along. Safe to run again after a crash: it edits the job's
// one comment, continues the stored conversation, and finds the conversation's pull request
// instead of opening another.
import type { IssueJob } from "../../../store/jobs.ts";
import { updateJob } from "../../../store/jobs.ts";
import { agentFailure, type JobRun } from "../../run/agent.ts";
import { resumes } from "../../run/history.ts";
import type { Working } from "../../run/kind.ts";
import type { JobWorkspace } from "../../run/workspace.ts";
import type { IssueAttempt, PipelineOutcome } from "./attempt.ts";
import { gather } from "./gather.ts";
import { type JobImages, NO_IMAGES, readJobImages } from "./images.ts";
import type { ModeExtras, ModeJob } from "./modes/mode.ts";
import { suggest } from "./modes/suggest.ts";
import { instructionFor, withImages } from "./request.ts";
import { chooseTarget } from "./target.ts";

/** gather → target → workspace → agent → the mode's end. */
export async function workOnIssue(
  job: IssueJob,
  attempt: IssueAttempt,
  ctx: Working,
): Promise<PipelineOutcome> {
  const { run, deps, granted, place } = ctx;
  const { context, progress } = attempt;
  const gathered = await gather(deps, attempt);
  if ("ended" in gathered) return gathered.ended;
  const { mode: asked, ...found } = gathered;
  const target = chooseTarget({
    conversation: found.conversation,
    job,
    mode: found.request.mode,
    pushes: asked.pushes,
    issue: found.issue,
    title: context.title,
    defaultBranch: context.defaultBranch,
  });
  if (!target.ok) return attempt.notice("refused", "🚫", target.headline, target.text);
  const mode = target.suggests ? suggest : asked;
  progress.view.steps = mode.steps;
  // An automation's run on the issue that started it; a retry someone asked for is theirs.
  const automation = job.trigger === "automation" ? context.automation?.name : undefined;
  const modeJob: ModeJob = { run, deps, place, attempt, granted, ...found, target, automation };
  const prepared = (await mode.prepare?.(modeJob)) ?? {};
  if ("ended" in prepared) return prepared.ended;
  // Read now: the signed image URLs last minutes, and the workspace's setup may take longer.
  const images = await jobImages(modeJob);
  if (mode.pushes) await updateJob(deps.db.pool, job.id, { branch: target.branch });

  const ws = await ctx.workspace({
    cloneUrl: context.cloneUrl,
    installationId: job.installationId,
    branch: target.branch,
    baseBranch: context.defaultBranch,
    setup: mode.runsSetup,
    ...(target.suggests && { pullRequest: job.number }),
  });
  const started = (await mode.inWorkspace?.(modeJob, ws)) ?? {};
  if ("ended" in started) return started.ended;
  progress.step("agent", `workspace ready on ${target.branch}`);

  const extras = { ...prepared, ...started };
  const result = await runAgent(ctx, modeJob, ws, extras, images);
  const failure = agentFailure(result);
  if (failure) return attempt.failed(failure);
  return mode.finish(modeJob, { ws, result, extras });
}

/** The images the job shows the model; none when it resumes a turn that showed them. */
function jobImages({
  run,
  deps,
  conversation,
  history,
  issue,
  itemSeen,
}: ModeJob): Promise<JobImages> {
  if (resumes(run.attempt, history)) return Promise.resolve(NO_IMAGES);
  // The description's images went with the turn that showed the description.
  const sources = (issue.images ?? []).filter((image) => !(itemSeen && image.inDescription));
  return readJobImages(deps.db.pool, conversation.id, sources, {
    ...deps.imageFetch,
    signal: run.signal,
  });
}

function runAgent(
  ctx: Working,
  job: ModeJob,
  ws: JobWorkspace,
  extras: ModeExtras,
  images: JobImages,
): Promise<JobRun> {
  const { plugins, suggesting, ...told } = extras;
  return ctx.agent({
    mode: job.request.mode,
    ws,
    history: job.history,
    message: () => withImages(instruction(job, { ...told, suggests: !!suggesting }), images),
    ...(plugins && { extraPlugins: plugins }),
    ...(suggesting && { instructions: suggesting.instructions }),
  });
}

/** The message that starts the job's turn: the request, and what its mode read for it. */
function instruction(
  job: ModeJob,
  told: Omit<ModeExtras, "plugins" | "suggesting"> & { suggests: boolean },
): string {
  const { attempt } = job;
  return instructionFor({
    request: job.request,
    requester: attempt.job.requester,
    number: attempt.job.number,
    kind: attempt.context.itemKind,
    context: job.issue,
    itemSeen: job.itemSeen,
    ...told,
    ...(job.automation !== undefined && { automation: job.automation }),
    retry: attempt.job.command === "retry",
  });
}
