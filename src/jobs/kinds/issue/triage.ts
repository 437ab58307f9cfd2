// Triage, an automation's mode on a new issue: the model picks labels from the repository's own
// (only those the automation names, when it names them) with a tool of its own, and its final text
// is the one comment. No file changes, nothing pushed.
import type { ProbotOctokit } from "probot";
import { z } from "zod";
import type { Plugin } from "../../../agent/plugins.ts";
import { type Item, jobMarker } from "../../../github/comments.ts";
import { codeSpan, quietMentions } from "../../../github/markdown.ts";
import type { JobRun } from "../../run/agent.ts";
import type { IssueAttempt, PipelineOutcome } from "./attempt.ts";

const LABELS_REPORT = "labels";
const LabelList = z.array(z.object({ name: z.string() }));
const Chosen = z.array(z.string());

/**
 * The labels the triage may apply, by name: the repository's, or of those only the ones the
 * automation names (`allowed`, any case), when it names them.
 */
export async function repositoryLabels(
  octokit: ProbotOctokit,
  item: Pick<Item, "owner" | "repo">,
  allowed?: readonly string[],
): Promise<string[]> {
  const route = "GET /repos/{owner}/{repo}/labels";
  const labels = LabelList.parse(
    await octokit.paginate(route, { owner: item.owner, repo: item.repo, per_page: 100 }),
  );
  const names = labels.map((label) => label.name);
  if (allowed === undefined) return names;
  const named = new Set(allowed.map((label) => label.toLowerCase()));
  return names.filter((name) => named.has(name.toLowerCase()));
}

/**
 * apply_labels, which takes only the given labels (any case) and records the choice; the
 * labels go on the issue when the run has ended (triageEnd), so a run that fails applies none.
 */
export function labelPlugin(labels: readonly string[]): Plugin {
  const byName = new Map(labels.map((label) => [label.toLowerCase(), label]));
  return {
    name: "triage",
    description: "Labels the issue being triaged.",
    guidance: "",
    tools: [
      {
        name: "apply_labels",
        description:
          "Label the issue being triaged. Only the labels listed in the instruction are taken. Call it once with every label that fits; a later call replaces the earlier choice.",
        input_schema: {
          type: "object",
          properties: { labels: { type: "array", items: { type: "string" } } },
          required: ["labels"],
        },
        runsIn: "worker",
        async handler(input, can) {
          const asked = Chosen.safeParse(input.labels);
          if (!asked.success) return { content: "labels must be a list of names.", isError: true };
          const unknown = asked.data.filter((name) => !byName.has(name.trim().toLowerCase()));
          if (unknown.length > 0) {
            return {
              content: `Not labels you may apply: ${unknown.join(", ")}. Nothing was applied; choose from the list in the instruction.`,
              isError: true,
            };
          }
          const found = asked.data.flatMap((n) => byName.get(n.trim().toLowerCase()) ?? []);
          const chosen = [...new Set(found)];
          can.report(LABELS_REPORT, chosen);
          return chosen.length > 0
            ? `The issue will be labelled ${chosen.join(", ")} when you finish.`
            : "The issue will get no labels.";
        },
      },
    ],
  };
}

/** Applies the labels the run chose and writes its final text as the job's one comment. */
export async function triageEnd(
  attempt: IssueAttempt,
  result: JobRun,
  automation: string,
): Promise<PipelineOutcome> {
  const chosen = Chosen.catch([]).parse(result.reports[LABELS_REPORT]);
  if (chosen.length > 0) {
    await attempt.octokit.rest.issues.addLabels({
      owner: attempt.item.owner,
      repo: attempt.item.repo,
      issue_number: attempt.item.number,
      labels: chosen,
    });
  }
  const footer = [
    `Triage by vmpilot's automation ${codeSpan(automation)}`,
    ...(chosen.length > 0 ? [`labels: ${chosen.map((label) => codeSpan(label)).join(", ")}`] : []),
    `[job #${attempt.job.id}](${attempt.url})`,
  ].join(" · ");
  const text = quietMentions(result.finalText.trim()) || "(no comment)";
  return attempt.end(
    "succeeded",
    [text, "", `<sub>${footer}</sub>`, "", jobMarker(attempt.job.id)].join("\n"),
  );
}
