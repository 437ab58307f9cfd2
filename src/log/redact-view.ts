// The forms of a text that redaction matches on. A token may be split (terminal escapes, invisible
// characters, a CR or backspace, a line break) or escaped (JSON \u, \x, %-encoding) so that no
// pattern sees it whole in the text as written; a view takes those out, and remembers where each
// of its characters came from, so that a match in it redacts the right span of the text itself.
// Everything else in the text (colours, escapes, line breaks) is kept as it was.

// Between two characters that can be part of a token. The lookbehind comes after the characters
// it looks past, so that most positions fail on the first character.
const TOKEN = String.raw`[\w.+/=-]`;
const between = (inner: string) => `(?:${inner})(?<=${TOKEN}(?:${inner}))(?=${TOKEN})`;

// CSI; OSC, DCS, SOS, PM and APC strings up to BEL or ST; their 8-bit forms; invisible characters,
// CR and backspace between token characters. Bounded, disjoint classes: linear time.
const NOISE = [
  String.raw`[\x1b]\[[0-?]{0,64}[ -/]{0,8}[@-~]`,
  String.raw`\x9b[0-?]{0,64}[ -/]{0,8}[@-~]`,
  String.raw`(?:[\x1b][\]PX^_]|[\x90\x98\x9d-\x9f])[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)`,
  between(String.raw`[\u00ad\u200b-\u200f\u2060-\u2064\ufeff\r\x08]{1,64}`),
].join("|");
const ESCAPES = String.raw`\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}|%[0-9a-fA-F]{2}|\\/`;
// Real line breaks and their JSON escapes.
const BREAKS = between(String.raw`\r?\n|\\r\\n|\\[nr]`);

export const HAS_BREAKS = new RegExp(BREAKS);

/** What a view takes out or decodes. */
export const EDITS = {
  /** Terminal controls and invisible characters out, escapes of token characters decoded. */
  plain: new RegExp(`${NOISE}|${ESCAPES}`, "g"),
  /** Line breaks between token characters out too. */
  joined: new RegExp(`${NOISE}|${ESCAPES}|${BREAKS}`, "g"),
};

// Only escapes of characters a token can hold are decoded: an escaped quote, space or `@` stays
// as it is, so decoding never ends a value early (`pa%40ss@host` keeps its password whole).
const DECODED = /^[\w.+/=~-]$/;

/** What an edit puts in the match's place: the match itself when it is left as it is. */
function edited(match: string): string {
  // Escapes are told apart by their first characters, taken-out text by anything else.
  const prefix =
    match[0] === "%" ? 1 : match[0] === "\\" && (match[1] === "u" || match[1] === "x") ? 2 : 0;
  if (prefix === 0) return match === "\\/" ? "/" : "";
  const char = String.fromCharCode(Number.parseInt(match.slice(prefix), 16));
  return DECODED.test(char) ? char : match;
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
