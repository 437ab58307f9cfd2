// Secret redaction for everything that leaves the process: log lines, GitHub comments, stored
// messages. Rules (redact-rules.ts) are matched on views of the text (redact-view.ts) with split
// and escaped tokens made whole; base64 and hex runs are decoded (and gunzipped) and searched too.
// Every match marks a span of the text as written, and only those spans are replaced.
import { constants, gunzipSync } from "node:zlib";
import { JOINED_RULES, keywordsIn, RULES, type Rule } from "./redact-rules.ts";
import { EDITS, HAS_BREAKS, View } from "./redact-view.ts";

export const REDACTED = "[REDACTED]";

// Secrets shorter than this are not registered: replacing every "secret" or "1234" would make
// logs unreadable and protect nothing. Decoded runs shorter than this are not searched either.
const MIN_SECRET_LENGTH = 8;
const registered = new Set<string>();

/** Adds a configured secret (webhook secret, API key, ...) so that it is redacted verbatim. */
export function registerSecret(value: string | undefined): void {
  if (!value || value.length < MIN_SECRET_LENGTH) return;
  registered.add(value);
  // Multi-line secrets (private keys) are also seen with escaped newlines, e.g. in JSON.
  if (value.includes("\n")) registered.add(value.replaceAll("\n", "\\n"));
}

/** Forgets all registered secrets (tests). */
export function clearRegisteredSecrets(): void {
  registered.clear();
}

type Span = [number, number];

export function redact(text: string): string {
  const spans = secretsIn(text, 0, { inflated: 0 }).sort((a, b) => a[0] - b[0]);
  if (spans.length === 0) return text;
  // Overlapping and touching spans become one.
  let out = "";
  let done = -1;
  for (const [start, end] of spans) {
    if (start > done) out += `${text.slice(Math.max(done, 0), start)}${REDACTED}`;
    done = Math.max(done, end);
  }
  return out + text.slice(done);
}

// A base64 or hex run may hold a secret that is encoded again (a docker config in a Kubernetes
// secret); this many layers are decoded.
const DECODE_DEPTH = 4;
// What one redaction may gunzip, all runs and layers together: a small run can inflate a
// thousandfold. A gzip run that does not fit is redacted whole, unread.
const INFLATE_BUDGET = 1 << 20;
const GZIP = Buffer.from([0x1f, 0x8b]);
/** What one redaction has spent of its budget. */
interface Spent {
  inflated: number;
}
// Whole runs only: a match never starts inside a run, so a short word is read once.
const ENCODED = /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}/g;

/** The spans of the text that hold secrets, in any order, possibly overlapping. */
function secretsIn(text: string, depth: number, spent: Spent): Span[] {
  const spans: Span[] = [];
  const plain = new View(text, EDITS.plain);
  const joined = HAS_BREAKS.test(text) ? new View(text, EDITS.joined) : undefined;
  // No keyword holds a line break, so the joined view has the plain one's: one pass serves both.
  const keywords = keywordsIn((joined ?? plain).text.toLowerCase());
  search(plain, RULES, keywords, depth, spent, spans);
  if (joined) search(joined, JOINED_RULES, keywords, depth, spent, spans);
  // Registered secrets as written too: a view would decode what looks like an escape in one.
  registeredIn(text, (start, end) => spans.push([start, end]));
  return spans;
}

function registeredIn(text: string, found: (start: number, end: number) => void): void {
  for (const secret of registered) {
    for (let at = text.indexOf(secret); at >= 0; at = text.indexOf(secret, at + 1)) {
      found(at, at + secret.length);
    }
  }
}

function search(
  view: View,
  rules: readonly Rule[],
  keywords: Set<string>,
  depth: number,
  spent: Spent,
  spans: Span[],
): void {
  const { text } = view;
  for (const rule of rules) {
    if (rule.keywords.length > 0 && !rule.keywords.some((keyword) => keywords.has(keyword))) {
      continue;
    }
    text.replace(rule.pattern, (match: string, context: string, secret: string, offset: number) => {
      if (secret && (rule.entropy === undefined || entropy(secret) >= rule.entropy)) {
        const start = offset + context.length;
        spans.push(view.source(start, start + secret.length));
      }
      return match;
    });
  }
  registeredIn(text, (start, end) => spans.push(view.source(start, end)));
  // The joined view's runs are the plain view's, but where a line break inside one was taken out.
  if (depth < DECODE_DEPTH) searchEncoded(view, rules === JOINED_RULES, depth, spent, spans);
}

/**
 * Decodes the base64 and hex runs that are text, and searches them all at once; a run that holds
 * a secret, or gzip past the budget, is redacted whole.
 */
function searchEncoded(
  view: View,
  joinedOnly: boolean,
  depth: number,
  spent: Spent,
  spans: Span[],
): void {
  const decoded: string[] = [];
  const starts: number[] = [];
  const runs: Span[] = [];
  let length = 0;
  view.text.replace(ENCODED, (run: string, offset: number) => {
    if (joinedOnly && !view.editedWithin(offset, offset + run.length)) return run;
    const text = decodeRun(run, spent);
    if (text === TOO_BIG) spans.push(view.source(offset, offset + run.length));
    else if (text !== undefined) {
      decoded.push(text);
      starts.push(length);
      runs.push(view.source(offset, offset + run.length));
      // Blank lines between runs: no view joins two runs into one token.
      length += text.length + 2;
    }
    return run;
  });
  if (decoded.length === 0) return;
  for (const [start, end] of secretsIn(decoded.join("\n\n"), depth + 1, spent)) {
    // The runs the span falls in.
    for (let i = lastAtOrBefore(starts, start); i < runs.length; i++) {
      const runStart = starts[i] as number;
      if (runStart >= end) break;
      if (start < runStart + (decoded[i] as string).length) spans.push(runs[i] as Span);
    }
  }
}

/** The index of the last of the ascending values at or before the position; 0 if none. */
function lastAtOrBefore(values: number[], position: number): number {
  let low = 0;
  let high = values.length - 1;
  while (low < high) {
    const middle = (low + high + 1) >> 1;
    if ((values[middle] as number) <= position) low = middle;
    else high = middle - 1;
  }
  return low;
}

const TOO_BIG = Symbol("gzip past the budget");

function decodeRun(run: string, spent: Spent): string | undefined | typeof TOO_BIG {
  const hex = /^(?:[0-9a-fA-F]{2})+$/.test(run)
    ? unzipped(Buffer.from(run, "hex"), spent)
    : undefined;
  return hex ?? unzipped(Buffer.from(run, "base64"), spent);
}

/** The bytes as text, gunzipped first if they are gzip. */
function unzipped(bytes: Buffer, spent: Spent): string | undefined | typeof TOO_BIG {
  if (!bytes.subarray(0, 2).equals(GZIP)) return readable(bytes);
  let inflated: Buffer;
  try {
    inflated = gunzipSync(bytes, {
      maxOutputLength: Math.max(INFLATE_BUDGET - spent.inflated, 1),
      // A cut-off stream is read as far as it goes.
      finishFlush: constants.Z_SYNC_FLUSH,
    });
  } catch (error) {
    if (error instanceof RangeError) return TOO_BIG;
    // Not gzip after all: what random letters decode to.
    return undefined;
  }
  spent.inflated += inflated.length;
  return readable(inflated);
}

/** The bytes as text, unless they are binary (what random letters decode to). */
function readable(bytes: Buffer): string | undefined {
  if (bytes.length < MIN_SECRET_LENGTH) return undefined;
  const text = bytes.toString("utf8");
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters mark binary data.
  return /[\x00-\x08\x0e-\x1f\x7f\ufffd]/.test(text) ? undefined : text;
}

/** Shannon entropy in bits per character, as gitleaks measures it. */
function entropy(text: string): number {
  const counts = new Map<string, number>();
  for (const char of text) counts.set(char, (counts.get(char) ?? 0) + 1);
  let bits = 0;
  for (const count of counts.values()) {
    const share = count / text.length;
    bits -= share * Math.log2(share);
  }
  return bits;
}

type Container = unknown[] | Record<string, unknown>;

function isContainer(value: unknown): value is Container {
  if (Array.isArray(value)) return true;
  return (
    typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype
  );
}

function redactError(error: Error): Error {
  const copy = Object.assign(Object.create(Object.getPrototypeOf(error)), error) as Error;
  copy.message = redact(error.message);
  if (error.stack) copy.stack = redact(error.stack);
  return copy;
}

/**
 * Redacts every string inside a JSON-like value (plain objects and arrays, at any depth, cycles
 * included) and copies errors with their message and stack redacted. What holds nothing to
 * redact is returned as it is, the whole value included; a copied object's references to
 * copied objects (a cycle's too) point at the copies.
 */
export function redactDeep<T>(value: T): T {
  if (typeof value === "string") return redact(value) as T;
  if (value instanceof Error) return redactError(value) as T;
  if (!isContainer(value)) return value;
  // Every container once, without recursion; the containers that hold each one; the strings
  // that change; the containers that hold such a string or an error.
  const order: Container[] = [value];
  const seen = new Set<unknown>(order);
  const holders = new Map<Container, Container[]>();
  const strings = new Map<string, string>();
  const changed = new Set<Container>();
  for (let i = 0; i < order.length; i++) {
    const node = order[i] as Container;
    for (const child of Object.values(node)) {
      if (typeof child === "string") {
        if (!strings.has(child)) strings.set(child, redact(child));
        if (strings.get(child) !== child) changed.add(node);
      } else if (child instanceof Error) changed.add(node);
      else if (isContainer(child)) {
        const known = holders.get(child);
        if (known) known.push(node);
        else holders.set(child, [node]);
        if (!seen.has(child)) {
          seen.add(child);
          order.push(child);
        }
      }
    }
  }
  // A container changes when anything it holds does.
  const pending = [...changed];
  for (let node = pending.pop(); node; node = pending.pop()) {
    for (const holder of holders.get(node) ?? []) {
      if (!changed.has(holder)) {
        changed.add(holder);
        pending.push(holder);
      }
    }
  }
  const copies = new Map<unknown, Container>();
  for (const node of changed) copies.set(node, Array.isArray(node) ? [] : {});
  for (const [node, copy] of copies) {
    for (const [key, child] of Object.entries(node as Container)) {
      (copy as Record<string, unknown>)[key] =
        typeof child === "string"
          ? strings.get(child)
          : child instanceof Error
            ? redactError(child)
            : (copies.get(child) ?? child);
    }
  }
  return (copies.get(value) ?? value) as T;
}
