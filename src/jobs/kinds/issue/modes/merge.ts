// The merge mode, after the base branch moved on: git merges the base into the pull request's
// branch in the workspace, the agent resolves what git could not, and vmpilot pushes the merge.
import { commitAuthor } from "../../../run/deliver.ts";
import { startMerge } from "../merge.ts";
import { mergeBody } from "../outcome.ts";
import { onPushed, type PipelineMode } from "./mode.ts";

export const merge: PipelineMode = {
  steps: ["acknowledged", "workspace", "agent", "tests", "pushed"],
  pushes: false,
  // It needs nothing of the pull request but its branch, which the conversation knows.
  readsItem: false,
  runsSetup: true,
  async inWorkspace({ attempt, run, target }, ws) {
    const { defaultBranch } = attempt.context;
    const started = await startMerge(ws, defaultBranch, run.signal);
    if (started) return { merge: started };
    const text = `\`${target.branch}\` already holds \`${defaultBranch}\`.`;
    return { ended: await attempt.notice("succeeded", "ℹ️", "Nothing to merge", text) };
  },
  async finish(job, { ws, result, extras }) {
    const { deps, attempt } = job;
    if (!extras.merge) throw new Error(`job ${attempt.job.id} has no merge to finish`);
    const merged = await mergeBody({
      attempt,
      ws,
      merge: extras.merge,
      token: () => deps.installationToken(attempt.job.installationId),
      result,
      settings: job.granted.settings,
      author: commitAuthor(deps, attempt.context.appSlug),
      signal: job.run.signal,
      onPushed: onPushed(job, result),
    });
    return attempt.end(merged.ok ? "succeeded" : "failed", merged.body);
  },
};
