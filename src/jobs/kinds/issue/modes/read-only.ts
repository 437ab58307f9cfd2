// The modes that change no file and push nothing: plan (a plan in the comment, for approval),
// review (a posted pull request review) and triage (an automation's labels and one comment).
import { planBody, reviewBody } from "../outcome.ts";
import { labelPlugin, repositoryLabels, triageEnd } from "../triage.ts";
import type { PipelineMode } from "./mode.ts";

const STEPS = ["acknowledged", "workspace", "agent"] as const;

export const plan: PipelineMode = {
  steps: STEPS,
  pushes: false,
  readsItem: true,
  runsSetup: true,
  finish: ({ attempt, granted }, { result }) =>
    attempt.end("succeeded", planBody(attempt, result, granted.settings)),
};

export const review: PipelineMode = {
  steps: STEPS,
  pushes: false,
  readsItem: true,
  readsDiff: true,
  runsSetup: true,
  async finish({ attempt, target, issue, granted }, { result }) {
    const number = target.prNumber ?? attempt.job.number;
    const body = await reviewBody(attempt, result, number, issue, granted.settings);
    return attempt.end("succeeded", body);
  },
};

export const triage: PipelineMode = {
  steps: STEPS,
  pushes: false,
  readsItem: true,
  // It only reads the code: the setup (installing dependencies) would be time and money spent on
  // every new issue for nothing.
  runsSetup: false,
  async prepare({ attempt }) {
    const allowed = attempt.context.automation?.labels;
    const labels = await repositoryLabels(attempt.octokit, attempt.item, allowed);
    return { labels, plugins: [labelPlugin(labels)] };
  },
  finish: ({ attempt, automation }, { result }) =>
    triageEnd(attempt, result, automation ?? "triage"),
};
