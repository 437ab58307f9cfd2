// `/vmpilot review`: the agent's review, posted as one pull request review with inline comments
// on the lines it points at (`path:line — text`, as the code_review plugin asks).
import type { ProbotOctokit } from "probot";
import { quietMentions } from "../../../github/progress-comment.ts";
import { redact } from "../../../log/redact.ts";

export interface InlineComment {
  path: string;
  line: number;
  body: string;
}

const ANCHOR = /^\s*(?:[-*]|\d+\.)?\s*`([^`\s:]+):(\d+)(?:-\d+)?`\s*[—–:-]*\s*(.*)$/;
const MAX_INLINE = 50;

/** Splits the review into its summary and the comments anchored to `path:line`. */
export function parseReview(text: string): { summary: string; comments: InlineComment[] } {
  const summary: string[] = [];
  const comments: InlineComment[] = [];
  // A comment runs on until a blank line; text after that belongs to the summary again.
  let open: InlineComment | undefined;
  for (const line of text.split("\n")) {
    const anchor = ANCHOR.exec(line);
    if (anchor) {
      open = { path: anchor[1] as string, line: Number(anchor[2]), body: (anchor[3] ?? "").trim() };
      comments.push(open);
    } else if (line.trim() === "") {
      open = undefined;
      summary.push(line);
    } else if (open) {
      open.body = `${open.body}\n${line}`.trim();
    } else {
      summary.push(line);
    }
  }
  return { summary: summary.join("\n").trim(), comments };
}

/** Lines of the new file versions that the diff shows, which are the only ones GitHub takes. */
export function commentableLines(files: readonly { filename: string; patch?: string }[]) {
  const lines = new Map<string, Set<number>>();
  for (const file of files) {
    const set = new Set<number>();
    // Zero until the first hunk header: a file without a patch (binary, too big) has no lines.
    let line = 0;
    for (const row of (file.patch ?? "").split("\n")) {
      const hunk = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(row);
      if (hunk) {
        line = Number(hunk[1]);
        continue;
      }
      if (line === 0 || row.startsWith("-") || row.startsWith("\\")) continue;
      set.add(line++);
    }
    lines.set(file.filename, set);
  }
  return lines;
}

function clean(text: string): string {
  return redact(quietMentions(text));
}

/** Posts one review; comments on lines outside the diff go into its body instead. */
export async function postReview(
  octokit: ProbotOctokit,
  input: { owner: string; repo: string; number: number; headSha?: string; text: string },
): Promise<{ inline: number; url: string }> {
  const repo = { owner: input.owner, repo: input.repo };
  const { summary, comments } = parseReview(input.text);
  const files = await octokit.paginate(octokit.rest.pulls.listFiles, {
    ...repo,
    pull_number: input.number,
    per_page: 100,
  });
  const commentable = commentableLines(files);
  const inline = comments.filter((c) => commentable.get(c.path)?.has(c.line)).slice(0, MAX_INLINE);
  const elsewhere = comments.filter((c) => !inline.includes(c));
  const body = [
    summary || "Review by vmpilot.",
    ...(elsewhere.length
      ? ["", "Outside the diff:", ...elsewhere.map((c) => `- \`${c.path}:${c.line}\` ${c.body}`)]
      : []),
  ].join("\n");
  const { data } = await octokit.rest.pulls.createReview({
    ...repo,
    pull_number: input.number,
    // Without it GitHub reviews the pull request's latest commit.
    ...(input.headSha && { commit_id: input.headSha }),
    event: "COMMENT",
    body: clean(body),
    comments: inline.map((c) => ({
      path: c.path,
      line: c.line,
      side: "RIGHT",
      body: clean(c.body),
    })),
  });
  return { inline: inline.length, url: data.html_url };
}
