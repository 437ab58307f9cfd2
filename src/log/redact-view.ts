// The forms of a text that redaction matches on. A token may be split (terminal escapes, invisible
// characters, a CR or backspace, a line break or tab, a string concatenation) or escaped (JSON \u,
// \x, %-encoding, HTML entities, fullwidth and other compatibility forms) so that no pattern sees
// it whole in the text as written; a view takes those out, and remembers where each of its
// characters came from, so that a match in it redacts the right span of the text itself.
// Everything else in the text (colours, escapes, line breaks) is kept as it was.

// The characters NFKC makes a token character of (fullwidth ｇ, superscript ², circled Ⓐ): a
// test checks this list against String.prototype.normalize over the whole BMP.
export const COMPATIBLE = String.raw`\u00aa\u00b2\u00b3\u00b9\u00ba\u017f\u02b0\u02b2\u02b3\u02b7\u02b8\u02e1-\u02e3\u1d2c\u1d2e\u1d30\u1d31\u1d33-\u1d3a\u1d3c\u1d3e-\u1d43\u1d47-\u1d49\u1d4d\u1d4f\u1d50\u1d52\u1d56-\u1d58\u1d5b\u1d62-\u1d65\u1d9c\u1da0\u1dbb\u2024\u2070\u2071\u2074-\u207a\u207c\u207f-\u208a\u208c\u2090-\u2093\u2095-\u209c\u2102\u210a-\u210e\u2110-\u2113\u2115\u2119-\u211d\u2124\u2128\u212a\u212c\u212d\u212f-\u2131\u2133\u2134\u2139\u2145-\u2149\u2160\u2164\u2169\u216c-\u2170\u2174\u2179\u217c-\u217f\u2460-\u2468\u24b6-\u24ea\u2c7c\u2c7d\ua7f1-\ua7f4\ufb29\ufe33\ufe34\ufe4d-\ufe4f\ufe52\ufe62\ufe63\ufe66\uff0b\uff0d-\uff19\uff1d\uff21-\uff3a\uff3f\uff41-\uff5a\uff5e`;

// Between two characters that can be part of a token. The lookbehind comes after the characters
// it looks past, so that most positions fail on the first character.
const TOKEN = String.raw`[\w.+/=${COMPATIBLE}-]`;
const between = (inner: string) => `(?:${inner})(?<=${TOKEN}(?:${inner}))(?=${TOKEN})`;

// CSI; OSC, DCS, SOS, PM and APC strings up to BEL or ST; their 8-bit forms; invisible characters,
// CR and backspace between token characters. Bounded, disjoint classes: linear time.
const NOISE = [
  String.raw`[\x1b]\[[0-?]{0,64}[ -/]{0,8}[@-~]`,
  String.raw`\x9b[0-?]{0,64}[ -/]{0,8}[@-~]`,
  String.raw`(?:[\x1b][\]PX^_]|[\x90\x98\x9d-\x9f])[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)`,
  between(String.raw`[\u00ad\u200b-\u200f\u2060-\u2064\ufeff\r\x08]{1,64}`),
].join("|");
const ESCAPES = [
  String.raw`\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}|%[0-9a-fA-F]{2}|\\/`,
  "&#[0-9]{1,7};|&#[xX][0-9a-fA-F]{1,6};|&(?:lowbar|period|sol|plus|equals);",
  `[${COMPATIBLE}]`,
].join("|");
// Real line breaks, tabs and their JSON escapes; the quotes, spaces and plus sign that join two
// string literals ("ghp_ab" + "cd", or "ab" "cd" as C, Python and shells join them).
const BREAKS = between(String.raw`\r?\n|\t|\\r\\n|\\[nrt]|["'\x60]\s{0,16}(?:\+\s{0,16})?["'\x60]`);

export const HAS_BREAKS = new RegExp(BREAKS);

/** What a view takes out or decodes. */
export const EDITS = {
  /**
   * Terminal controls and invisible characters out, escapes and compatibility forms of token
   * characters decoded.
   */
  plain: new RegExp(`${NOISE}|${ESCAPES}`, "g"),
  /** Line breaks, tabs and string concatenations between token characters out too. */
  joined: new RegExp(`${NOISE}|${ESCAPES}|${BREAKS}`, "g"),
};

// Only escapes of characters a token can hold are decoded: an escaped quote, space or `@` stays
// as it is, so decoding never ends a value early (`pa%40ss@host` keeps its password whole).
const DECODED = /^[\w.+/=~-]$/;
const NAMED: Record<string, string> = {
  "&lowbar;": "_",
  "&period;": ".",
  "&sol;": "/",
  "&plus;": "+",
  "&equals;": "=",
};

/** What an edit puts in the match's place: the match itself when it is left as it is. */
function edited(match: string): string {
  const char = decoded(match);
  if (char === undefined) return "";
  return DECODED.test(char) ? char : match;
}

/** The character an escape stands for; undefined for text that is taken out. */
function decoded(match: string): string | undefined {
  // Escapes are told apart by their first characters, taken-out text by anything else.
  if (match === "\\/") return "/";
  if (match[0] === "%") return fromCode(match.slice(1), 16);
  if (match[0] === "\\" && (match[1] === "u" || match[1] === "x")) {
    return fromCode(match.slice(2), 16);
  }
  if (match.startsWith("&#x") || match.startsWith("&#X")) return fromCode(match.slice(3, -1), 16);
  if (match.startsWith("&#")) return fromCode(match.slice(2, -1), 10);
  if (match[0] === "&") return NAMED[match];
  // A compatibility form is one character; a longer match is noise, whatever it holds.
  const compatible = match.length === 1 ? match.normalize("NFKC") : match;
  return compatible === match ? undefined : compatible;
}

function fromCode(digits: string, radix: number): string {
  const code = Number.parseInt(digits, radix);
  // Past the last code point there is no character, and the escape is kept as it is.
  return code <= 0x10ffff ? String.fromCodePoint(code) : "";
}

export class View {
  readonly text: string;
  // Edit i replaced source[sourceStart, sourceEnd) by text[start, end).
  readonly #start: number[] = [];
  readonly #end: number[] = [];
  readonly #sourceStart: number[] = [];
  readonly #sourceEnd: number[] = [];

  constructor(source: string, edits: RegExp) {
    let shift = 0;
    this.text = source.replace(edits, (match: string, offset: number) => {
      const out = edited(match);
      if (out === match) return match;
      this.#start.push(offset + shift);
      this.#end.push(offset + shift + out.length);
      this.#sourceStart.push(offset);
      this.#sourceEnd.push(offset + match.length);
      shift += out.length - match.length;
      return out;
    });
  }

  /** The last edit that starts at or before the view's position, or -1. */
  #editAt(position: number): number {
    let low = 0;
    let high = this.#start.length - 1;
    while (low <= high) {
      const middle = (low + high) >> 1;
      if ((this.#start[middle] as number) <= position) low = middle + 1;
      else high = middle - 1;
    }
    return high;
  }

  /** Whether something was taken out or decoded inside the view's span [start, end). */
  editedWithin(start: number, end: number): boolean {
    return this.#editAt(end - 1) !== this.#editAt(start);
  }

  /** The span of the source that the view's span [start, end) came from. */
  source(start: number, end: number): [number, number] {
    return [this.#sourceOf(start, false), this.#sourceOf(end - 1, true)];
  }

  #sourceOf(position: number, after: boolean): number {
    const i = this.#editAt(position);
    if (i < 0) return position + (after ? 1 : 0);
    const end = this.#end[i] as number;
    if (position < end) return (after ? this.#sourceEnd[i] : this.#sourceStart[i]) as number;
    return (this.#sourceEnd[i] as number) + position - end + (after ? 1 : 0);
  }
}
