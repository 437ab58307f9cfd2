import { z } from "zod";
import { PathEscapeError } from "../../workspace/paths.ts";
import { FileRefusedError } from "../../workspace/read-capped.ts";
import type { Workspace } from "../../workspace/types.ts";
import { decodeText, type TextFile, toDisk } from "./text-file.ts";
import { type AgentTool, defineTool, type ToolOutcome, toolError } from "./types.ts";

export interface EditorOptions {
  /** Most characters one `view` returns; also sent to the model as `max_characters`. */
  maxCharacters?: number;
  /** Files larger than this are refused outright. */
  maxFileBytes?: number;
}

const EDITOR_NAME = "str_replace_based_edit_tool";
const DEFAULT_MAX_CHARACTERS = 30_000;
const DEFAULT_MAX_FILE_BYTES = 5_000_000;
const MAX_LISTING = 1_000;
const SNIPPET_CONTEXT = 4;

/** Every command's fields in one object, as the native tool documents them; each command checks its own. */
export const EditorInput = z.object({
  command: z.enum(["view", "create", "str_replace", "insert"]),
  path: z.string().describe("Relative to the repository root."),
  file_text: z.string().optional().describe("create: the whole file."),
  old_str: z.string().optional().describe("str_replace: the text to replace."),
  new_str: z.string().optional().describe("str_replace and insert: the new text."),
  insert_line: z.int().optional().describe("insert: the line to insert after."),
  // The native tool sends the inserted text here; a function call may use new_str.
  insert_text: z.string().optional().describe("insert: the new text (or in new_str)."),
  view_range: z
    .array(z.int())
    .optional()
    .describe("view: [first, last] line; -1 as last means the end."),
});
type EditorInput = z.output<typeof EditorInput>;

/** What an insert adds: the native tool sends `insert_text`, the function schema `new_str`. */
export function insertedText(input: EditorInput): string | undefined {
  return input.insert_text ?? input.new_str;
}

/**
 * The native text editor (`text_editor_20250728`) over the workspace's file operations, which
 * already refuse paths that leave the root. Files whose lines all end in CRLF are matched with
 * LF and written back with CRLF.
 */
export function editorTool(workspace: Workspace, options: EditorOptions = {}): AgentTool {
  const maxCharacters = options.maxCharacters ?? DEFAULT_MAX_CHARACTERS;
  const maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;

  async function load(path: string): Promise<TextFile | ToolOutcome> {
    const bytes = await workspace.readFile(path, maxFileBytes);
    const file = decodeText(bytes);
    if (!file) {
      return toolError(
        `${path} is a binary file (${bytes.length} bytes); the editor only handles UTF-8 text. Inspect it with bash (file, xxd | head) instead.`,
      );
    }
    return file;
  }

  async function save(path: string, file: TextFile, text: string): Promise<void> {
    await workspace.writeFile(path, toDisk({ ...file, text }));
  }

  const commands: Record<
    EditorInput["command"],
    (path: string, input: EditorInput) => Promise<ToolOutcome>
  > = {
    async view(path, input) {
      let file: TextFile | ToolOutcome;
      try {
        file = await load(path);
      } catch (error) {
        if (error instanceof FileRefusedError && error.reason === "directory") {
          return listing(workspace, path);
        }
        throw error;
      }
      if ("isError" in file) return file;
      return view(path, file, input.view_range, maxCharacters);
    },

    async create(path, input) {
      if (input.file_text === undefined) return toolError("`create` needs `file_text`.");
      const existing = await load(path).catch((error: unknown) => {
        if (code(error) === "ENOENT") return undefined;
        // Too large to load is fine to overwrite (as plain LF text); a FIFO or device is not.
        if (error instanceof FileRefusedError && error.reason === "too_large") {
          return { text: "", crlf: false };
        }
        throw error;
      });
      // Overwriting keeps a CRLF file CRLF (and its BOM), whatever line endings the model sent.
      const base: TextFile =
        existing && !("isError" in existing) ? existing : { text: "", crlf: false };
      await save(path, base, normalize(input.file_text, base.crlf));
      const lines = countLines(input.file_text);
      return ok(
        `${existing ? "Overwrote" : "Created"} ${path} (${lines} line${lines === 1 ? "" : "s"}).`,
      );
    },

    async str_replace(path, input) {
      if (input.old_str === undefined || input.old_str === "") {
        return toolError("`str_replace` needs a non-empty `old_str`.");
      }
      const file = await load(path);
      if ("isError" in file) return file;
      const oldStr = normalize(input.old_str, file.crlf);
      const newStr = normalize(input.new_str ?? "", file.crlf);
      const at = occurrences(file.text, oldStr);
      if (at.length === 0) {
        return toolError(
          `No match for old_str in ${path}. It must match the file exactly, including whitespace and indentation; view the file to copy the exact text.`,
        );
      }
      if (at.length > 1) {
        const lines = at.map((i) => lineOf(file.text, i)).join(", ");
        return toolError(
          `old_str matches ${at.length} times in ${path} (at lines ${lines}). Include more surrounding lines so it matches exactly once.`,
        );
      }
      const start = at[0] as number;
      const text = file.text.slice(0, start) + newStr + file.text.slice(start + oldStr.length);
      await save(path, file, text);
      const line = lineOf(text, start);
      return ok(`Edited ${path}.\n${snippet(text, line, line + countLines(newStr) - 1)}`);
    },

    async insert(path, input) {
      const line = input.insert_line;
      const inserted = insertedText(input);
      if (inserted === undefined) return toolError("`insert` needs `insert_text`.");
      if (line === undefined) {
        return toolError("`insert` needs an integer `insert_line` (0 inserts at the top).");
      }
      const file = await load(path);
      if ("isError" in file) return file;
      const total = countLines(file.text);
      if (line < 0 || line > total) {
        return toolError(
          `insert_line must be between 0 and ${total} (${path} has ${total} lines).`,
        );
      }
      const text = insertAfter(file.text, line, normalize(inserted, file.crlf));
      await save(path, file, text);
      return ok(
        `Inserted after line ${line} of ${path}.\n${snippet(text, line + 1, line + countLines(inserted))}`,
      );
    },
  };

  return defineTool({
    name: EDITOR_NAME,
    definition: { type: "text_editor_20250728", name: EDITOR_NAME, max_characters: maxCharacters },
    input: EditorInput,
    async execute(input) {
      if (input.path === "") return toolError("`path` is required.");
      try {
        return await commands[input.command](input.path, input);
      } catch (error) {
        return toolError(describeError(input.path, error));
      }
    },
  });
}

function ok(content: string): ToolOutcome {
  return { content, isError: false };
}

function code(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

function describeError(path: string, error: unknown): string {
  if (error instanceof PathEscapeError)
    return `${error.message}. Only files inside the workspace can be used.`;
  switch (code(error)) {
    case "ENOENT":
      return `${path} does not exist.`;
    case "EISDIR":
      return `${path} is a directory.`;
    case "ENOTDIR":
      return `A parent of ${path} is not a directory.`;
    case "EACCES":
    case "EPERM":
      return `Permission denied for ${path}.`;
    case undefined:
      break;
    default:
      // Node's errno messages carry the host path; the code alone is enough for the model.
      return `Could not use ${path} (${code(error)}).`;
  }
  if (error instanceof FileRefusedError) {
    const hint =
      error.reason === "too_large" ? " Use bash (sed -n, head, grep -n) to work with it." : "";
    return `${error.message}${hint}`;
  }
  return `Could not use ${path}: ${error instanceof Error ? error.message : String(error)}`;
}

function normalize(text: string, crlf: boolean): string {
  return crlf ? text.replaceAll("\r\n", "\n") : text;
}

function countLines(text: string): number {
  if (text === "") return 0;
  const breaks = text.split("\n").length - 1;
  return text.endsWith("\n") ? breaks : breaks + 1;
}

function occurrences(text: string, needle: string): number[] {
  const found: number[] = [];
  for (let i = text.indexOf(needle); i !== -1; i = text.indexOf(needle, i + 1)) found.push(i);
  return found;
}

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let i = text.indexOf("\n"); i !== -1 && i < index; i = text.indexOf("\n", i + 1)) line++;
  return line;
}

function insertAfter(text: string, line: number, inserted: string): string {
  let offset = 0;
  for (let n = 0; n < line; n++) {
    const next = text.indexOf("\n", offset);
    offset = next === -1 ? text.length : next + 1;
  }
  let before = text.slice(0, offset);
  const after = text.slice(offset);
  if (before !== "" && !before.endsWith("\n")) before += "\n";
  const keepNewline = after !== "" || text.endsWith("\n");
  const body = keepNewline && !inserted.endsWith("\n") ? `${inserted}\n` : inserted;
  return before + body + after;
}

function numbered(lines: readonly string[], first: number): string {
  return lines.map((l, i) => `${String(first + i).padStart(6)}\t${l}`).join("\n");
}

function splitLines(text: string): string[] {
  const lines = text.split("\n");
  if (text.endsWith("\n")) lines.pop();
  return lines;
}

function snippet(text: string, from: number, to: number): string {
  const lines = splitLines(text);
  const start = Math.max(1, from - SNIPPET_CONTEXT);
  const end = Math.min(lines.length, Math.max(from, to) + SNIPPET_CONTEXT);
  return numbered(lines.slice(start - 1, end), start);
}

function view(
  path: string,
  file: TextFile,
  range: readonly number[] | undefined,
  maxCharacters: number,
): ToolOutcome {
  const lines = splitLines(file.text);
  let start = 1;
  let end = lines.length;
  if (range !== undefined) {
    const [first, last] = range;
    if (range.length !== 2 || first === undefined || last === undefined) {
      return toolError(
        "view_range must be [start_line, end_line]; use -1 as end_line for the end of the file.",
      );
    }
    [start, end] = [first, last];
    if (end === -1) end = lines.length;
    if (start < 1 || start > Math.max(lines.length, 1) || end < start || end > lines.length) {
      return toolError(
        `view_range ${JSON.stringify(range)} is outside ${path}, which has ${lines.length} lines.`,
      );
    }
  } else if (file.text.length > maxCharacters) {
    return toolError(
      `${path} has ${lines.length} lines (${file.text.length} characters), more than one view shows (${maxCharacters}). View a part with view_range, e.g. [1, 200].`,
    );
  }
  if (lines.length === 0) return ok(`${path} is empty.`);
  let shown = "";
  let last = start - 1;
  for (let n = start; n <= end; n++) {
    const row = `${String(n).padStart(6)}\t${lines[n - 1]}\n`;
    if (shown.length + row.length > maxCharacters) break;
    shown += row;
    last = n;
  }
  if (last < end) {
    shown += `[output stops at line ${last} to stay under ${maxCharacters} characters; view from line ${last + 1} with view_range]\n`;
  }
  return ok(shown.trimEnd());
}

async function listing(workspace: Workspace, path: string): Promise<ToolOutcome> {
  const entries: string[] = [];
  const base = path.replace(/\/+$/, "") || ".";
  async function walk(dir: string, depth: number): Promise<void> {
    for (const name of await workspace.listDir(dir)) {
      if (name.startsWith(".") || name === "node_modules/" || entries.length >= MAX_LISTING)
        continue;
      const child = dir === "." ? name : `${dir}/${name}`;
      entries.push(child);
      if (depth < 2 && name.endsWith("/")) await walk(child.slice(0, -1), depth + 1);
    }
  }
  await walk(base, 1);
  const more = entries.length >= MAX_LISTING ? `\n[listing stopped at ${MAX_LISTING} entries]` : "";
  return ok(
    `Files and directories up to 2 levels deep in ${path}, excluding hidden items and node_modules:\n${entries.join("\n")}${more}`,
  );
}
