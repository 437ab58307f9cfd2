// Untrusted GitHub text (issue bodies, comments, reviews) is cleaned before it reaches the model:
// what a reader of the rendered page would not see is removed, so hidden instructions cannot ride
// along. Character classes exclude their own delimiters, so every pattern runs in linear time
// and megabyte inputs stay fast.

// Zero-width and invisible formatting characters, bidi controls, Unicode tag characters
// ("ASCII smuggling"), variation selectors, C0/C1 controls other than tab and newline, and lone
// surrogate halves (JSON's \u escapes carry them): left in, two halves around a removed character
// would join into a tag character once it is gone.
// Built from a string: a literal would trip linters on its control characters and joiners.
const INVISIBLE = new RegExp(
  "[\\u0000-\\u0008\\u000B-\\u001F\\u007F-\\u009F\\u00AD\\u034F\\u061C\\u115F\\u1160\\u17B4\\u17B5" +
    "\\u180B-\\u180F\\u200B-\\u200F\\u202A-\\u202E\\u2060-\\u206F\\u3164\\uFE00-\\uFE0F\\uFEFF\\uFFA0" +
    "\\uFFF9-\\uFFFB]|\\uDB40[\\uDC00-\\uDDEF]|[\\uD800-\\uDBFF](?![\\uDC00-\\uDFFF])|(?<![\\uD800-\\uDBFF])[\\uDC00-\\uDFFF]",
  "g",
);

// HTML comments never render; an unterminated one hides the rest of the text.
const HTML_COMMENT = /<!--[\s\S]*?(?:-->|$)/g;

// Numeric entities can spell out text ("&#105;gnore") or invisible characters ("&#x200B;").
const NUMERIC_ENTITY = /&#(x[0-9a-f]{1,6}|[0-9]{1,7});/gi;
const INVISIBLE_ENTITY =
  /&(?:zwj|zwnj|shy|lrm|rlm|ZeroWidthSpace|NoBreak|InvisibleTimes|InvisibleComma|ApplyFunction|it|ic|af);/g;

// Elements whose content GitHub does not show.
const HIDDEN_ELEMENT =
  /<(script|style|template|noscript|iframe|object|textarea)\b[^<>]*>[\s\S]*?(?:<\/\1\s*>|$)/gi;
// Any other raw HTML tag: its attributes are inspected separately.
const TAG = /<([a-z][a-z0-9-]{0,30})(\s[^<>]*)?>/gi;
const HIDDEN_ATTRIBUTE =
  /\s(?:alt|title|aria-[a-z]{1,20}|data-[\w-]{1,50}|placeholder|value|hidden)(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'>]+))?/gi;

// ![alt](url): the alt text is not shown inline.
const IMAGE_ALT = /!\[[^[\]\n]*\]\(/g;
// [text](url "title"), 'title' or (title): titles only show on hover.
const LINK_TITLE = /(\]\([^\s()[\]]*)[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\))(?=\))/g;
// Reference definitions render nothing; `[//]: # (text)` is the classic markdown comment.
const LINK_DEFINITION = /^ {0,3}\[[^[\]\n]+\]:[^\n]*$/gm;

const BLANK_RUNS = /\n{3,}/g;

function decodeEntity(_match: string, code: string): string {
  const value =
    code[0] === "x" || code[0] === "X" ? Number.parseInt(code.slice(1), 16) : Number(code);
  // Printable ASCII is decoded so it is read as written, except markup characters, which would
  // turn visible text into tags; everything else is dropped.
  if (value < 0x20 || value >= 0x7f) return "";
  const char = String.fromCharCode(value);
  return char === "<" || char === ">" || char === "&" ? _match : char;
}

function stripHiddenAttributes(_match: string, name: string, attributes: string | undefined) {
  return attributes ? `<${name}${attributes.replace(HIDDEN_ATTRIBUTE, "")}>` : _match;
}

/** Removes invisible and bidi control characters only (for short single-line fields). */
export function stripInvisible(text: string): string {
  return text.replace(INVISIBLE, "");
}

// Terminal escape sequences (CSI and OSC) in logs: colours and titles, invisible on a terminal.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching terminal escapes is the point.
const TERMINAL_ESCAPE = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g;

/** Makes untrusted plain text (a build log) safe to show: no escapes, no invisible characters. */
export function sanitizePlain(text: string): string {
  return stripInvisible(text.replace(/\r\n?/g, "\n").replace(TERMINAL_ESCAPE, ""));
}

/** Makes untrusted markdown safe to show to the model: what remains is what a reader sees. */
export function sanitize(text: string): string {
  // Leading blank lines go at the end, but not the first line's indentation: four spaces make it
  // a code block, and a command shown in one must stay shown, not run.
  return text
    .replace(/\r\n?/g, "\n")
    .replace(HTML_COMMENT, "")
    .replace(NUMERIC_ENTITY, decodeEntity)
    .replace(INVISIBLE_ENTITY, "")
    .replace(INVISIBLE, "")
    .replace(HIDDEN_ELEMENT, "")
    .replace(TAG, stripHiddenAttributes)
    .replace(IMAGE_ALT, "![](")
    .replace(LINK_TITLE, "$1")
    .replace(LINK_DEFINITION, "")
    .split("\n")
    .map((line) => line.trimEnd())
    .join("\n")
    .replace(BLANK_RUNS, "\n\n")
    .replace(/^\n+/, "")
    .trimEnd();
}
