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

/** Names shown in one line; more are counted. */
const MAX_NAMED = 20;

function named(items: readonly string[]): string {
  const more = items.length - MAX_NAMED;
  return [...items.slice(0, MAX_NAMED), ...(more > 0 ? [`and ${more} more`] : [])].join("; ");
}

/** The patch of the files that fit in `room`, and those that did not. */
function patchOf(patched: readonly Patched[], room: number) {
  const shown: Patched[] = [];
  const left: string[] = [];
  let size = 0;
  for (const file of patched) {
    if (size + file.text.length > room) left.push(codeSpan(file.path));
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
    const why = named(found.leftOut.map((file) => `${codeSpan(file.path)} ${file.why}`));
    notes.push(`Left out, as a review cannot show them: ${why}.`);
  }
  if (cut)
    notes.push(
      "The change is larger than a review reads (4 MB of diff): the files past that are left out.",
    );
  const parts = [text || "Suggested by vmpilot.", ...notes];
  const used = parts.join("\n\n").length;
  const { shown, left } = patchOf(found.patched, MAX_COMMENT_CHARS - used - 10_000);
  if (shown.length > 0) {
    const why = named(shown.map((file) => `${codeSpan(file.path)}: ${file.why}`));
    const patch = shown.map((file) => file.text).join("");
    const bar = fenceFor(patch);
    parts.push(
      `These changes do not fit suggestions (${why}); here they are as a patch for \`git apply\`:`,
      `${bar}diff\n${patch}${bar}`,
    );
  }
  if (left.length > 0) parts.push(`Too large for this review: the change to ${named(left)}.`);
  // Only names past all reason (thousands of characters each) could still make it too long.
  return parts.join("\n\n").slice(0, MAX_COMMENT_CHARS);
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
