// A job's change to a fork's pull request, posted as one review (event COMMENT) of suggestions
// (suggestions.ts), with what they cannot carry as a patch in its body. Should GitHub refuse a
// comment's place (its diff drew a line elsewhere than git's), the review goes again as a patch
// alone: the work is never lost to a 422.
import type { ProbotOctokit } from "probot";
import { redact } from "../log/redact.ts";
import { codeSpan, quietMentions } from "./markdown.ts";
import { githubStatus } from "./request-status.ts";
import {
  type DiffFile,
  fenceFor,
  MAX_COMMENT_CHARS,
  type Patched,
  type Suggestions,
  suggestChanges,
} from "./suggestions.ts";

/** Of the summary the agent ends with, what the review's body shows. */
const SUMMARY_CHARS = 8_000;

export interface SuggestionReview {
  owner: string;
  repo: string;
  number: number;
  /** The head the job worked on, which the comments' lines are of. */
  commitId: string;
  summary: string;
  /** The job's change and the pull request's diff, parsed (suggestions.ts). */
  change: readonly DiffFile[];
  pull: readonly DiffFile[];
  /** The change was too large to read whole: the files past `change`'s are not shown. */
  cut: boolean;
}

export interface PostedSuggestions {
  url: string;
  suggestions: number;
  /** Files whose change is in the body's patch. */
  patched: number;
}

const list = (paths: readonly string[]) => paths.map(codeSpan).join(", ");

/** The patch of the files that fit in the body, and those that did not. */
function patchOf(patched: readonly Patched[], room: number) {
  const shown: Patched[] = [];
  const left: string[] = [];
  let size = 0;
  for (const file of patched) {
    if (size + file.text.length + 100 > room) left.push(file.path);
    else {
      shown.push(file);
      size += file.text.length;
    }
  }
  return { shown, left };
}

/** The review's body: the agent's summary, then the patch and what is left out, each said once. */
export function suggestionReviewBody(
  summary: string,
  found: Pick<Suggestions, "patched" | "leftOut">,
  cut: boolean,
): string {
  const text = redact(quietMentions(summary.trim())).slice(0, SUMMARY_CHARS);
  const notes: string[] = [];
  if (found.leftOut.length > 0) {
    const why = found.leftOut.map((file) => `${codeSpan(file.path)} ${file.why}`).join("; ");
    notes.push(`Left out, as a review cannot show them: ${why}.`);
  }
  if (cut)
    notes.push("The change is too large to show whole here: files after these are left out.");
  const head = [text || "Suggested by vmpilot.", ...notes].join("\n\n");
  if (found.patched.length === 0) return head;
  const { shown, left } = patchOf(found.patched, MAX_COMMENT_CHARS - head.length - 1_000);
  const parts = [head];
  if (shown.length > 0) {
    const why = shown.map((file) => `${codeSpan(file.path)}: ${file.why}`).join("; ");
    const patch = shown.map((file) => file.text).join("");
    const bar = fenceFor(patch);
    parts.push(
      `These changes do not fit suggestions (${why}); here they are as a patch for \`git apply\`:`,
      `${bar}diff\n${patch}${bar}`,
    );
  }
  if (left.length > 0) parts.push(`Too large for this review: the change to ${list(left)}.`);
  return parts.join("\n\n");
}

async function post(
  octokit: ProbotOctokit,
  input: SuggestionReview,
  found: Suggestions,
): Promise<PostedSuggestions> {
  const { data } = await octokit.rest.pulls.createReview({
    owner: input.owner,
    repo: input.repo,
    pull_number: input.number,
    commit_id: input.commitId,
    event: "COMMENT",
    body: suggestionReviewBody(input.summary, found, input.cut),
    comments: found.comments,
  });
  return { url: data.html_url, suggestions: found.comments.length, patched: found.patched.length };
}

export async function postSuggestions(
  octokit: ProbotOctokit,
  input: SuggestionReview,
): Promise<PostedSuggestions> {
  const found = suggestChanges(input.change, input.pull);
  try {
    return await post(octokit, input, found);
  } catch (error) {
    if (githubStatus(error) !== 422 || found.comments.length === 0) throw error;
    // No line is shown without the pull request's diff: every file goes into the patch.
    return post(octokit, input, suggestChanges(input.change, []));
  }
}
