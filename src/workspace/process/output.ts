import { StringDecoder } from "node:string_decoder";

/** What the model sees of one command's output, in characters (stdout and stderr together). */
export const MODEL_OUTPUT_CAP = 30_000;

/** Upper bound on what is kept for the job log, so `yes` cannot exhaust the worker's memory. */
export const LOG_OUTPUT_CAP = 4_000_000;

function marker(cut: number): string {
  return `\n\n[... ${cut} characters cut ...]\n\n`;
}

/** Keeps head and tail of `text` so that the result, marker included, is at most `max` characters. */
export function capText(text: string, max: number): { text: string; truncated: boolean } {
  if (text.length <= max) return { text, truncated: false };
  // The marker's length depends on the number it prints; the cut is at least text.length - max.
  const room = Math.max(0, max - marker(text.length).length);
  const head = Math.ceil(room / 2);
  const tail = room - head;
  const cut = text.length - head - tail;
  return {
    text: text.slice(0, head) + marker(cut) + (tail > 0 ? text.slice(text.length - tail) : ""),
    truncated: true,
  };
}

/**
 * Splits one budget between stdout and stderr: a stream that fits in half the budget keeps all of
 * it and the other stream gets the rest, so a short error message is never cut for a long log.
 */
export function capStreams(
  stdout: string,
  stderr: string,
  max = MODEL_OUTPUT_CAP,
): { stdout: string; stderr: string; truncated: boolean } {
  if (stdout.length + stderr.length <= max) return { stdout, stderr, truncated: false };
  const half = Math.floor(max / 2);
  let errBudget = Math.min(stderr.length, half);
  const outBudget = Math.min(stdout.length, max - errBudget);
  errBudget = max - outBudget;
  const out = capText(stdout, outBudget);
  const err = capText(stderr, errBudget);
  return { stdout: out.text, stderr: err.text, truncated: out.truncated || err.truncated };
}

/**
 * Accumulates a stream's text, keeping the first and last `limit / 2` characters once it grows
 * past `limit`, and counting what fell out of the middle.
 */
export class OutputCapture {
  readonly #decoder = new StringDecoder("utf8");
  readonly #half: number;
  #head = "";
  #tail: string[] = [];
  #tailLength = 0;
  #dropped = 0;

  constructor(limit = LOG_OUTPUT_CAP) {
    this.#half = Math.floor(limit / 2);
  }

  write(chunk: Buffer): void {
    this.#append(this.#decoder.write(chunk));
  }

  /** Call once, after the stream ended. */
  text(): string {
    this.#append(this.#decoder.end());
    let tail = this.#tail.join("");
    let dropped = this.#dropped;
    if (tail.length > this.#half) {
      dropped += tail.length - this.#half;
      tail = tail.slice(tail.length - this.#half);
    }
    if (dropped === 0) return this.#head + tail;
    return this.#head + marker(dropped) + tail;
  }

  #append(text: string): void {
    if (text.length === 0) return;
    if (this.#head.length < this.#half) {
      const take = this.#half - this.#head.length;
      this.#head += text.slice(0, take);
      text = text.slice(take);
      if (text.length === 0) return;
    }
    this.#tail.push(text);
    this.#tailLength += text.length;
    // Trim only when the tail is well over its share, to keep appends cheap.
    if (this.#tailLength > this.#half * 2) {
      const joined = this.#tail.join("");
      const keep = joined.slice(joined.length - this.#half);
      this.#dropped += joined.length - keep.length;
      this.#tail = [keep];
      this.#tailLength = keep.length;
    }
  }
}
