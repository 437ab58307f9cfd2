// Untrusted text as an attacker would write it: markdown that shows or hides a trigger, characters
// a reader cannot see (lone surrogate halves among them, which JSON's \u escapes can carry), and
// arbitrary code points between them.
import fc from "fast-check";

const pieces = fc.constantFrom(
  "/vmpilot",
  "/VMPILOT ",
  "@vmpilot-bot",
  "@VMPILOT-BOT[bot]",
  "me@vmpilot-bot",
  " fix",
  "plan:",
  " stop",
  "retry!",
  "help",
  "unknown",
  "```",
  "~~~",
  "> ",
  "    ",
  "\t",
  "\n",
  "\r\n",
  "\r",
  " ",
  ",",
  "<pre>",
  "</pre>",
  "<code ",
  "</code>",
  "`",
  "<!--",
  "-->",
  "&#x200B;",
  "&#105;",
  "&#60;",
  "&zwj;",
  "\u200B",
  "\u202E",
  "\uFEFF",
  "\u00AD",
  "\uDB40",
  "\uDC41",
  "\u{E0041}",
  "\u{1F600}",
  "<script>",
  "</script>",
  '<img alt="x">',
  "[x]: y",
  "![alt](u)",
  '[a](u "t")',
);

// Any code point but a surrogate half, as fast-check's "binary" unit, which first maps all 1.1
// million of them back to indexes: a second of CPU for each test file that imports this one.
const SURROGATES = 0x800;
const codePoint = fc
  .integer({ min: 0, max: 0x10ffff - SURROGATES })
  .map((code) => String.fromCodePoint(code < 0xd800 ? code : code + SURROGATES));

export const untrustedText = fc
  .array(fc.oneof(pieces, fc.string({ unit: codePoint, maxLength: 6 })), { maxLength: 24 })
  .map((parts) => parts.join(""));
