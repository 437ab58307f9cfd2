// A job's change to a fork's pull request, as review comments the contributor commits with one
// click: ```suggestion blocks, each replacing lines of the pull request's head (side RIGHT) that
// its diff shows, as GitHub requires. A file whose change no suggestion can carry (a new, deleted
// or renamed file, a line outside the pull request's diff, a suggestion over GitHub's size for a
// comment) goes whole into a patch instead, so that the suggestions and the patch together make
// the job's change, each file's one way or the other; a binary file, or one whose change looks
// like it holds a secret, is left out and named. Pure: git's diffs in, comments out.
import { redact } from "../log/redact.ts";

/** GitHub refuses a comment's body longer than this (422 "Body is too long (maximum is 65536 characters)"). */
export const MAX_COMMENT_CHARS = 65_536;

interface Hunk {
  oldStart: number;
  newStart: number;
  newLines: number;
  /** Its lines as git writes them: a ' ', '-' or '+' and the text, or "\ No newline ...". */
  lines: string[];
}

export interface DiffFile {
  /** The new side's path; the old side's for a deletion. */
  path: string;
  /** Why its change cannot be suggested whatever its lines: added, deleted, renamed... */
  whole?: string;
  /** Git shows no lines of it, and `git apply` takes no patch of it without them. */
  binary?: true;
  hunks: Hunk[];
  /** The file's part of the diff, headers included, as `git apply` takes it. */
  text: string;
}

/** A C-quoted path as git writes one (`"a/q\"uote"`), unquoted; any other as it is. */
function unquote(path: string): string {
  if (!path.startsWith('"') || !path.endsWith('"')) return path;
  const bytes: number[] = [];
  const simple: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13 };
  const inner = path.slice(1, -1);
  for (let i = 0; i < inner.length; i++) {
    const char = inner[i] as string;
    if (char !== "\\") {
      bytes.push(...Buffer.from(char));
      continue;
    }
    const next = inner[++i] ?? "";
    const octal = /^[0-7]{3}/.exec(inner.slice(i));
    if (octal) {
      bytes.push(Number.parseInt(octal[0], 8));
      i += 2;
    } else bytes.push(simple[next] ?? next.charCodeAt(0));
  }
  return Buffer.from(bytes).toString("utf8");
}

/** The path of a `--- a/…` or `+++ b/…` line; undefined for /dev/null. */
function sidePath(line: string): string | undefined {
  // Git ends the line with a tab when the path has a space.
  const path = unquote(line.slice(4).replace(/\t$/, ""));
  return path === "/dev/null" ? undefined : path.replace(/^[ab]\//, "");
}

/** `diff --git a/P b/P`: P, where both sides are the same. */
function headerPath(line: string): string {
  const rest = line.slice("diff --git ".length);
  const half = (rest.length - 1) / 2;
  const [a, b] = [rest.slice(0, half), rest.slice(half + 1)];
  return a.slice(2) === b.slice(2) ? unquote(b).replace(/^b\//, "") : rest;
}

const WHOLE: readonly [RegExp, string][] = [
  [/^new file mode /, "a new file"],
  [/^deleted file mode /, "a deleted file"],
  [/^rename from /, "a renamed file"],
  [/^copy from /, "a copied file"],
  [/^new mode /, "its mode changed"],
];

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

/** Git's unified diff (`git diff`, prefixes a/ and b/), file by file. */
export function parseDiff(text: string): DiffFile[] {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  const files: DiffFile[] = [];
  let i = 0;
  while (i < lines.length) {
    const start = i;
    const header = lines[i++] as string;
    if (!header.startsWith("diff --git ")) continue;
    let path = headerPath(header);
    let whole: string | undefined;
    let binary = false;
    const hunks: Hunk[] = [];
    while (i < lines.length && !(lines[i] as string).startsWith("diff --git ")) {
      const line = lines[i++] as string;
      const hunk = HUNK.exec(line);
      if (!hunk) {
        whole ??= WHOLE.find(([pattern]) => pattern.test(line))?.[1];
        binary ||= /^(Binary files |GIT binary patch)/.test(line);
        if (/^(\+\+\+|---) /.test(line)) path = sidePath(line) ?? path;
        else if (/^(rename|copy) to /.test(line)) path = unquote(line.replace(/^\w+ to /, ""));
        continue;
      }
      // Exactly as many lines as the header counts: a line of the file may look like a header.
      let old = Number(hunk[2] ?? 1);
      let added = Number(hunk[4] ?? 1);
      const body: string[] = [];
      while (i < lines.length && (old > 0 || added > 0 || lines[i]?.startsWith("\\"))) {
        const row = lines[i++] as string;
        body.push(row);
        if (row.startsWith(" ") || row.startsWith("-")) old--;
        if (row.startsWith(" ") || row.startsWith("+")) added--;
      }
      hunks.push({
        oldStart: Number(hunk[1]),
        newStart: Number(hunk[3]),
        newLines: Number(hunk[4] ?? 1),
        lines: body,
      });
    }
    const file: DiffFile = { path, hunks, text: `${lines.slice(start, i).join("\n")}\n` };
    if (whole) file.whole = whole;
    if (binary) file.binary = true;
    files.push(file);
  }
  return files;
}

/** The lines of each file's new side that a pull request's diff shows, as ranges per path. */
function shownLines(pull: readonly DiffFile[]): Map<string, [number, number][]> {
  const shown = new Map<string, [number, number][]>();
  for (const file of pull) {
    const ranges = file.hunks
      .filter((hunk) => hunk.newLines > 0)
      .map((hunk): [number, number] => [hunk.newStart, hunk.newStart + hunk.newLines - 1]);
    shown.set(file.path, ranges);
  }
  return shown;
}

/** A review comment as GitHub's create-a-review takes it. */
export interface SuggestionComment {
  path: string;
  /** The last line it replaces, in the head's file. */
  line: number;
  side: "RIGHT";
  /** The first, when it replaces more than one. */
  start_line?: number;
  start_side?: "RIGHT";
  body: string;
}

/** A file whose change is in the patch instead, and why (a phrase: "a new file"). */
export interface Patched {
  path: string;
  why: string;
  text: string;
}

export interface Suggestions {
  comments: SuggestionComment[];
  patched: Patched[];
  /** Files whose change is not shown at all, and why (a phrase: "is a binary file"). */
  leftOut: { path: string; why: string }[];
}

const UNTERMINATED = "it changes the last line, which ends without a line break";

/** One run of changed lines: head lines `from`..`to` become `lines`. */
interface Edit {
  from: number;
  to: number;
  lines: string[];
}

/**
 * The runs of changed lines of a hunk, each widened to a line of the head when it only adds
 * lines (a suggestion replaces at least one); a reason instead when one cannot be.
 */
function editsOf(hunk: Hunk): Edit[] | string {
  const edits: Edit[] = [];
  const rows = hunk.lines;
  let old = hunk.oldStart === 0 ? 1 : hunk.oldStart;
  /** The head's last line, shown unchanged, when no line break ends it. */
  let unterminated = 0;
  let i = 0;
  while (i < rows.length) {
    const row = rows[i] as string;
    if (row.startsWith("\\")) {
      // "\ No newline at end of file" after a changed line: the change is of that line's end.
      if (!rows[i - 1]?.startsWith(" ")) return UNTERMINATED;
      unterminated = old - 1;
      i++;
      continue;
    }
    if (row.startsWith(" ")) {
      old++;
      i++;
      continue;
    }
    const from = old;
    const lines: string[] = [];
    while (i < rows.length && /^[-+]/.test(rows[i] as string)) {
      const changed = rows[i++] as string;
      if (changed.startsWith("-")) old++;
      else lines.push(changed.slice(1));
    }
    if (old > from) {
      edits.push({ from, to: old - 1, lines });
      continue;
    }
    // Only added: onto the line before them, else the line after (the top of the file).
    const before = rows[i - lines.length - 1];
    const after = rows[i];
    if (before?.startsWith(" "))
      edits.push({ from: from - 1, to: from - 1, lines: [before.slice(1), ...lines] });
    else if (after?.startsWith(" "))
      edits.push({ from, to: from, lines: [...lines, after.slice(1)] });
    else return "it adds lines to an empty file";
  }
  // What a suggestion makes of a last line without its line break is GitHub's to decide.
  if (edits.some((edit) => edit.from <= unterminated && unterminated <= edit.to)) {
    return UNTERMINATED;
  }
  return edits;
}

/** A code fence no line of `text` can close. */
export function fenceFor(text: string): string {
  const runs = [...text.matchAll(/^[ \t]*(`+)/gm)].map((match) => match[1]?.length ?? 0);
  return "`".repeat(Math.max(3, ...runs.map((length) => length + 1)));
}

/** A ```suggestion block replacing the lines it is on with `lines`. */
function suggestionBody(lines: readonly string[]): string {
  const fence = fenceFor(lines.join("\n"));
  return [`${fence}suggestion`, ...lines, fence].join("\n");
}

/** The file's suggestions, or why it has none. */
function suggestFile(
  file: DiffFile,
  shown: [number, number][] | undefined,
): SuggestionComment[] | string {
  if (file.whole) return file.whole;
  const edits: Edit[] = [];
  for (const hunk of file.hunks) {
    const found = editsOf(hunk);
    if (typeof found === "string") return found;
    edits.push(...found);
  }
  if (edits.length === 0) return "it changes no line";
  const comments: SuggestionComment[] = [];
  for (const edit of edits) {
    if (!shown?.some(([first, last]) => first <= edit.from && edit.to <= last)) {
      return "it changes lines outside this pull request's diff";
    }
    if (edit.lines.some((line) => line.endsWith("\r"))) return "its lines end in CRLF";
    const body = suggestionBody(edit.lines);
    if (body.length > MAX_COMMENT_CHARS) return "a suggestion would be too large for a comment";
    comments.push({
      path: file.path,
      ...(edit.from < edit.to && { start_line: edit.from, start_side: "RIGHT" as const }),
      line: edit.to,
      side: "RIGHT",
      body,
    });
  }
  return comments;
}

/**
 * The job's change (`git diff <head> <work>`) as suggestions on the pull request whose diff (from
 * its merge base to the head) is `pull`, and a patch of the files they cannot carry.
 */
export function suggestChanges(
  change: readonly DiffFile[],
  pull: readonly DiffFile[],
): Suggestions {
  const shown = shownLines(pull);
  const found: Suggestions = { comments: [], patched: [], leftOut: [] };
  for (const file of change) {
    // Never posted, neither as a suggestion nor in a patch; nor cut into one `git apply` refuses.
    if (redact(file.text) !== file.text) {
      found.leftOut.push({ path: file.path, why: "holds text that looks like a secret" });
      continue;
    }
    if (file.binary) {
      found.leftOut.push({ path: file.path, why: "is a binary file" });
      continue;
    }
    const suggested = suggestFile(file, shown.get(file.path));
    if (typeof suggested === "string")
      found.patched.push({ path: file.path, why: suggested, text: file.text });
    else found.comments.push(...suggested);
  }
  return found;
}
