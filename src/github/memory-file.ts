// The lessons file (`.github/vmpilot/memory.md` unless `memory.path` says otherwise): what reviewers
// taught vmpilot, one Markdown list item each, with where it was learned and the files it is about.
// People edit it like any file; vmpilot only appends lessons and marks stale ones, in the pull
// request from `vmpilot/memory` (jobs/run/memory.ts), so what a maintainer wrote stays as written.
import { redact } from "../log/redact.ts";

export interface Lesson {
  /** One line or a short paragraph. */
  text: string;
  /** The review comment it was learned from. */
  citation: string;
  /** The files it is about, when it is about code. */
  files: string[];
}

/** A lesson as the file holds it. */
export interface FileLesson extends Lesson {
  /** Marked stale: a file it cites no longer exists. */
  stale: boolean;
}

/** The most a lesson's text may say: the file is read into every prompt. */
const MAX_LESSON_CHARS = 500;
const MAX_FILES = 10;
const STALE = "**Stale:**";
const FILES = " · files: ";

const HEADER = `# Lessons from review

What reviewers of this repository taught vmpilot, one lesson per item. Every vmpilot job reads this
file from the default branch. Edit or remove a lesson like any text; vmpilot proposes new ones in a
pull request from \`vmpilot/memory\`, and merging it is what approves them.
`;

/** A lesson's text on one line, without what would end its item or hide a secret. */
function oneLine(text: string): string {
  const flat = redact(text)
    .replace(/\s+/g, " ")
    .replaceAll(" — learned from <", " - learned from <")
    .trim();
  return flat.length > MAX_LESSON_CHARS ? `${flat.slice(0, MAX_LESSON_CHARS - 1)}…` : flat;
}

/** A path as a code span can show it; one with a backtick or a line break is no path of ours. */
const pathOk = (path: string) => /^[^`\s][^`\n]*$/.test(path) && path.length <= 300;

/** A lesson as the model or a person gave it, in the shape the file keeps. */
export function lessonOf(text: string, citation: string, files: readonly string[] = []): Lesson {
  const paths = [...new Set(files.map((file) => file.trim().replace(/^\.?\//, "")))];
  return {
    text: oneLine(text),
    citation: citation.trim(),
    files: paths.filter(pathOk).slice(0, MAX_FILES),
  };
}

function itemOf(lesson: FileLesson): string {
  const files = lesson.files.length
    ? `${FILES}${lesson.files.map((file) => `\`${file}\``).join(", ")}`
    : "";
  const stale = lesson.stale ? `${STALE} ` : "";
  return `- ${stale}${lesson.text} — learned from <${lesson.citation}>${files}`;
}

const ITEM = /^- (\*\*Stale:\*\* )?(.*?) — learned from <([^>\s]+)>(?: · files: (.*))?$/;

/** The lessons of the file: its list items in vmpilot's form (others are a person's, kept as is). */
export function readLessons(file: string): FileLesson[] {
  return file.split("\n").flatMap((line) => {
    const match = ITEM.exec(line.trimEnd());
    if (!match) return [];
    const files = [...(match[4] ?? "").matchAll(/`([^`]+)`/g)].map((found) => found[1] ?? "");
    return [
      { text: match[2] ?? "", citation: match[3] ?? "", files, stale: match[1] !== undefined },
    ];
  });
}

/** Whether the file already holds this lesson: the same text from the same comment. */
function holds(lessons: readonly Lesson[], lesson: Lesson): boolean {
  return lessons.some((had) => had.citation === lesson.citation && had.text === lesson.text);
}

/**
 * The file with `added` appended (but those it holds already) and the lessons whose cited files
 * are all in `gone` marked stale, each where it is; null when nothing changes.
 */
export function updateLessons(
  file: string | undefined,
  added: readonly Lesson[],
  gone: ReadonlySet<string>,
): string | null {
  let changed = false;
  const lines = (file ?? HEADER).split("\n").map((line) => {
    const [lesson] = readLessons(line);
    const stale = lesson && lesson.files.length > 0 && lesson.files.every((f) => gone.has(f));
    if (!lesson || lesson.stale || !stale) return line;
    changed = true;
    return itemOf({ ...lesson, stale: true });
  });
  const known = readLessons(lines.join("\n"));
  const fresh = added.filter(
    (lesson, i) => !holds(known, lesson) && !holds(added.slice(0, i), lesson),
  );
  if (fresh.length === 0 && !changed) return null;
  const body = lines.join("\n").replace(/\n*$/, "\n");
  if (fresh.length === 0) return body;
  // A list item right after text that is not one needs a blank line to start a list.
  const last = body.trimEnd().split("\n").at(-1) ?? "";
  const gap = last.startsWith("- ") ? "" : "\n";
  return `${body}${gap}${fresh.map((lesson) => itemOf({ ...lesson, stale: false })).join("\n")}\n`;
}

/** The files the lessons cite, for what no longer exists. */
export function citedFiles(file: string | undefined): string[] {
  return [...new Set(readLessons(file ?? "").flatMap((lesson) => lesson.files))];
}
