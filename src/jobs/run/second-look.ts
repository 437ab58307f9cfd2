// A second look before the pull request. Once a job's work is done and its tests pass, one more
// turn of the same conversation (the same prefix, read from the prompt cache) shows the model the
// request and the job's whole diff against the commit it began from (run-diff.ts: read by the
// worker's git in the mirror, not in the checkout), and asks for what the request wanted and the
// diff does not do, what it did not ask for, debug leftovers, commented-out code and secrets, and
// missing or weakened tests. What it finds it fixes, in a few more steps; the tests run again
// after any change (the testing plugin's finish check, on what the look changed). A look that does
// not end on its own, or whose changes leave the tests worse than it found them, is undone: the
// first passing diff goes out. The pull request says in one line what the look found and changed.
import type { AgentEvent } from "../../agent/events.ts";
import type { AgentLimits } from "../../agent/limits.ts";
import type { AgentResult } from "../../agent/loop.ts";
import { addUsage } from "../../agent/usage.ts";
import { codeBlock } from "../../github/markdown.ts";
import { SecondLook } from "../../store/job-event-kinds.ts";
import { diffRunWork, type RunDiff } from "../../workspace/git/run-diff.ts";
import { restoreRunWork, saveRunWork, workTree } from "../../workspace/git/turn-bundle.ts";
import type { Workspace } from "../../workspace/types.ts";
import type { JobProgress } from "./progress.ts";

/** The most steps a look takes, besides the job's own limits: one to read, a few to fix and test. */
export const LOOK_STEPS = 8;
/** The diff the model is shown, at most; a longer one is cut, and says where to read the rest. */
const MAX_DIFF_BYTES = 80_000;
/** The request quoted again, at most: the whole of it is earlier in the conversation. */
const MAX_REQUEST_CHARS = 10_000;
/** What the pull request quotes of the look's answer, at most. */
const MAX_REPORT_CHARS = 1_000;

/** What the second look found and did, for the pull request. */
interface LookReport {
  /** One short paragraph or list. */
  text: string;
  /** The look's changes are in the work delivered. */
  changed: boolean;
}

/** The run, with the look's report when there was one. */
export type Looked = AgentResult & { look?: LookReport };

/** One more turn of the job's agent, on the conversation the run left. */
type Again = (turn: {
  instruction: string;
  limits: AgentLimits;
  changed(): Promise<boolean>;
  onEvent(event: AgentEvent): AgentEvent;
}) => Promise<AgentResult>;

function quoted(text: string): string {
  const cut =
    text.length > MAX_REQUEST_CHARS
      ? `${text.slice(0, MAX_REQUEST_CHARS)}\n[… cut; the whole request is above]`
      : text;
  return cut
    .trim()
    .split("\n")
    .map((line) => `> ${line}`)
    .join("\n");
}

/** The look's message: what to check, the request, and the diff. */
function lookInstruction(input: {
  request: string | undefined;
  diff: RunDiff;
  steps: number;
}): string {
  const { diff } = input;
  const request = input.request?.trim()
    ? quoted(input.request)
    : "(The request is the message this job started with, above.)";
  const shown = diff.cut
    ? `${diff.bytes} bytes; the first ${diff.text.length} characters are shown: read the rest with \`git diff\` in the workspace`
    : `${diff.bytes} bytes`;
  return [
    "Before this work goes out as a pull request, take a second look at it (this is your instruction). Below are the request this job started with and the job's whole diff against the commit it began from, as the pull request will show it.",
    "Check the diff for:\n- what the request asked for and the diff does not do;\n- changes the request did not ask for;\n- debug leftovers (prints and logging added while working, temporary files), commented-out code, and secrets;\n- tests missing for what changed, or tests weakened, skipped or deleted.",
    `Fix what you find in the workspace, in at most ${input.steps} more steps; leave what is right as it is. If you change anything, run the tests again and report them with report_tests.`,
    'Then reply in a few short lines, for the pull request: what you found and what you changed. If you found nothing, reply only "Nothing found." This reply needs no Summary line.',
    `## The request\n\n${request}`,
    `## The diff (${shown})\n\n${codeBlock(diff.text, "diff")}`,
  ].join("\n\n");
}

/** The look's answer as the pull request quotes it. */
function reportText(finalText: string): string {
  const text = finalText
    .split("\n")
    .filter((line) => !/^\s*\**Summary:?\**:?\s/i.test(line))
    .join("\n")
    .trim();
  if (!text) return "Nothing found.";
  return text.length > MAX_REPORT_CHARS ? `${text.slice(0, MAX_REPORT_CHARS)}…` : text;
}

const outcomeOf = (result: AgentResult) =>
  (result.reports.tests as { outcome?: string } | undefined)?.outcome;

/** Why the look's changes are not delivered, or undefined when they are. */
function undoneWhy(first: AgentResult, look: AgentResult): string | undefined {
  if (look.reason !== "end_turn") {
    return `it stopped before it finished (${look.error?.message ?? look.detail ?? look.reason})`;
  }
  const after = outcomeOf(look);
  if (after === undefined) return "it changed files without running the tests again";
  if (outcomeOf(first) === "passed" && after !== "passed")
    return "the tests no longer passed after its changes";
  return undefined;
}

/** What is left of the job's limits once the run used its share; a look needs a step at least. */
function remaining(
  limits: Required<AgentLimits>,
  first: AgentResult,
  startedAt: number,
): AgentLimits | undefined {
  const left = {
    maxSteps: Math.min(LOOK_STEPS, limits.maxSteps - first.steps),
    maxCostUsd: limits.maxCostUsd - first.usage.costUsd,
    maxWallTimeMs: limits.maxWallTimeMs - (Date.now() - startedAt),
  };
  return left.maxSteps > 0 && left.maxCostUsd > 0 && left.maxWallTimeMs > 0 ? left : undefined;
}

/**
 * The look's message about the work since `startSha` (its diff read in `mirror`), with the work as
 * it is now to undo the look's changes with; null when the work changed nothing.
 */
export async function lookAt(input: {
  workspace: Workspace;
  mirror: string;
  startSha: string;
  request: string | undefined;
  steps: number;
}): Promise<{ instruction: string; bytes: number; before: Buffer } | null> {
  const before = await saveRunWork(input.workspace, input.startSha);
  if (!before) return null;
  const diff = await diffRunWork({
    mirror: input.mirror,
    bundle: before,
    baseSha: input.startSha,
    maxBytes: MAX_DIFF_BYTES,
  });
  const instruction = lookInstruction({ request: input.request, diff, steps: input.steps });
  return { instruction, bytes: diff.bytes, before };
}

/**
 * The job's run after its second look: the run itself when the look does not apply (nothing
 * changed, the tests did not pass), else with the look's usage, steps and reports added and
 * its report. Called only for runs that deliver a diff, with the look turned on.
 */
export async function secondLook(input: {
  workspace: Workspace;
  /** The mirror the checkout was made from. */
  mirror: string;
  /** HEAD when the run began. */
  startSha: string;
  /** The request's text, when this attempt made the request (not one resuming it). */
  request: string | undefined;
  first: AgentResult;
  /** The job's limits, the run's use of them counted from `startedAt`. */
  limits: Required<AgentLimits>;
  startedAt: number;
  again: Again;
  progress: Pick<JobProgress, "log">;
  signal: AbortSignal;
}): Promise<Looked> {
  const { first, workspace, progress, startSha } = input;
  const finished = first.reason === "end_turn" && first.detail === undefined;
  if (!finished || outcomeOf(first) === "failed" || startSha === "") return first;
  const limits = remaining(input.limits, first, input.startedAt);
  const steps = limits?.maxSteps ?? 0;
  const seen = await lookAt({ ...input, steps });
  if (!seen) return first;
  if (!limits) {
    const text = "Not taken: the run used up the job's limits.";
    progress.log(SecondLook, { message: `Second look: ${text}` });
    return { ...first, look: { text, changed: false } };
  }
  progress.log(SecondLook, {
    message: `A second look at the diff (${seen.bytes} bytes) before the pull request.`,
  });
  const tree = await workTree(workspace);
  const changed = async () => (await workTree(workspace)) !== tree;
  const look = await input.again({
    instruction: seen.instruction,
    limits,
    changed,
    // The job's cost so far goes on from the run's.
    onEvent: (event) =>
      event.type === "usage" ? { ...event, totals: addUsage(first.usage, event.totals) } : event,
  });
  if (input.signal.aborted) return first;
  const moved = await changed();
  const why = moved ? undoneWhy(first, look) : undefined;
  if (why) await restoreRunWork(workspace, { bundle: seen.before, baseSha: startSha }, true);
  const said = look.reason === "end_turn" ? reportText(look.finalText) : "";
  const text = why
    ? `${said ? `${said}\n\n` : ""}Its changes were undone: ${why}. The pull request has the work as it was before the second look.`
    : said ||
      `It stopped before it finished (${look.error?.message ?? look.detail ?? look.reason}).`;
  progress.log(SecondLook, { message: `Second look: ${text}` });
  return {
    ...first,
    steps: first.steps + look.steps,
    usage: addUsage(first.usage, look.usage),
    reports: why ? first.reports : { ...first.reports, ...look.reports },
    look: { text, changed: moved && !why },
  };
}
