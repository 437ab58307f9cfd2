// The fence language for a command's output in the chat face, so clients highlight it. A guess
// from the text's shape; plain text when unsure.

const DIFF = /^(diff --git |--- \S.*\n\+\+\+ |@@ -\d)/m;
const PYTHON_TRACE = /^Traceback \(most recent call last\):/m;
const JS_TRACE = /^\s+at .+(\(.+:\d+:\d+\)|:\d+:\d+)$/m;
const PYTHON = /^(def \w+\(|class \w+[(:]|from [\w.]+ import |import \w+$)/m;
const TYPESCRIPT =
  /^(import .+ from ["']|export (const|function|interface|type|class) |interface \w+ \{)/m;

export function fenceLanguage(text: string): string {
  const trimmed = text.trim();
  if (DIFF.test(trimmed)) return "diff";
  if (/^[[{]/.test(trimmed) && isJson(trimmed)) return "json";
  if (PYTHON_TRACE.test(trimmed)) return "pytb";
  if (JS_TRACE.test(trimmed)) return "js";
  if (TYPESCRIPT.test(trimmed)) return "typescript";
  if (PYTHON.test(trimmed)) return "python";
  return "text";
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
