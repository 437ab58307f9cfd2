// The scheduled run: an automation's prompt on a schedule, with no person behind it (the app is its
// requester), in a conversation of its own on no issue. The agent works on a branch of the run's
// own from the default branch; changes go out as a draft pull request, and the run's final comment
// goes on it. A run that changes nothing leaves its answer on /jobs only.
import { PipelineStep } from "../../../store/job-event-kinds.ts";
import { type Job, updateJob } from "../../../store/jobs.ts";
import { readScheduledContext, type ScheduledContext } from "../../automations/schedules.ts";
import { agentFailure } from "../../run/agent.ts";
import { onRow, type RowAttempt } from "../../run/attempt.ts";
import { deliver } from "../../run/deliver.ts";
import { deliveredComment, writeJobComment } from "../../run/final.ts";
import { type JobKind, repositoryOf } from "../../run/kind.ts";

type ScheduledJob = Job & { installationId: number; repositoryId: number };

export const scheduledRun: JobKind<ScheduledJob, RowAttempt> = {
  name: "scheduled run",
  freshGate: false,
  told: "requester",
  // An automation's job on no item.
  claims: (job): job is ScheduledJob =>
    job.trigger === "automation" &&
    job.number === null &&
    job.installationId !== null &&
    job.repositoryId !== null,
  async place(job, deps) {
    const context = readScheduledContext(job);
    const repository = await repositoryOf(deps, job, context);
    return { repository, starter: { app: `the scheduled automation ${context.automation.name}` } };
  },
  ...onRow({ awaited: false }),
  async work(job, attempt, ctx) {
    const { progress } = attempt;
    const context = readScheduledContext(job);
    const { name } = context.automation;
    // A branch of each run's own, whose pull request is the run's.
    const branch = `vmpilot/${name}-${job.id}`;
    await updateJob(ctx.deps.db.pool, job.id, { branch });
    progress.step("workspace", `scheduled run of ${name}`);
    const ws = await ctx.workspace({
      cloneUrl: context.cloneUrl,
      installationId: job.installationId,
      branch,
      baseBranch: context.defaultBranch,
      setup: true,
    });
    progress.step("agent", `workspace ready on ${branch}`);
    const result = await ctx.agent({ ws, message: () => instruction(context, job.instruction) });
    const failure = agentFailure(result);
    if (failure) return attempt.failed(failure);
    const delivered = await deliver(ctx, job, progress, {
      ws,
      result,
      defaultBranch: context.defaultBranch,
      title: name,
      summary: `Scheduled run of the automation \`${name}\`.\n\n${result.finalText}`,
      appSlug: context.appSlug,
    });
    const final = deliveredComment(job, progress, result, ctx.granted.settings, delivered, {
      of: `scheduled run of \`${name}\``,
    });
    // Its final comment goes on the pull request, there being no issue.
    const pr = delivered.pullRequest;
    if (pr) {
      const item = { owner: context.owner, repo: context.name, number: pr.number };
      const octokit = await ctx.deps.auth(job.installationId);
      await writeJobComment(ctx.deps, octokit, item, job, final.body);
    }
    progress.log(PipelineStep, { step: "done", message: final.headline });
    return attempt.end("succeeded");
  },
};

function instruction(context: ScheduledContext, prompt: string): string {
  const name = context.automation.name.replaceAll("`", "'");
  const quoted = prompt
    .trim()
    .split("\n")
    .map((line) => `> ${line}`)
    .join("\n");
  return `The repository's scheduled automation \`${name}\` asks (this is your instruction):\n\n${quoted}\n\nThis run is on a schedule: no one is waiting on an issue. You are on a new branch from \`${context.defaultBranch}\`. If there is nothing to change, change nothing and say why; changes you leave in the workspace go out as a draft pull request.`;
}
