const SUMMARY_LINE = /^\s*\**Summary:?\**:?\s*(.+?)\s*$/im;
const MAX_TITLE = 72;

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > MAX_TITLE ? `${line.slice(0, MAX_TITLE - 1).trimEnd()}…` : line;
}

/**
 * The one-line title of a run: the `Summary:` line the system prompt asks the model to end with,
 * or, when the model left it out, the task itself. Used as commit message and pull request title.
 */
export function runTitle(finalText: string, task: string): string {
  const fromModel = SUMMARY_LINE.exec(finalText)?.[1]?.replace(/^`|`$/g, "");
  if (fromModel?.trim()) return oneLine(fromModel);
  return oneLine(task) || "vmpilot changes";
}
