// How much of the store and of this process chat images may take. Stored, they are capped per
// conversation and per owner a day, and deleted after a while; being read, they hold memory (up to
// 5 MB each, for as long as a slow server takes), so this process reads only so many at once, and
// one person only a message's worth.
import {
  conversationImageHashes,
  deleteOldImages,
  imagesOfLastDay,
} from "../store/conversation-images.ts";
import type { Queryable } from "../store/sql.ts";
import type { Principal } from "./auth.ts";
import { ApiError } from "./errors.ts";

const PER_CONVERSATION = 50;
const PER_OWNER_A_DAY = 100;
/** Images are deleted this long after they were stored; a message then shows a line instead. */
const RETENTION_DAYS = 30;

/** Images being read at once: one person's, and this process's. */
const READING = { perPerson: 10, perProcess: 20 };

/**
 * Refuses new images past the owner's day or, given the conversation, past what it may hold.
 * `adding` tells the new images apart: their URLs before they are read, their SHA-256 after.
 */
export async function checkImageRoom(
  db: Queryable,
  who: Principal,
  adding: readonly string[],
  conversationId?: number,
): Promise<void> {
  if (adding.length === 0) return;
  let fresh = adding.length;
  if (conversationId !== undefined) {
    const held = await conversationImageHashes(db, conversationId);
    fresh = new Set(adding.filter((sha256) => !held.has(sha256))).size;
    if (held.size + fresh > PER_CONVERSATION) {
      throw new ApiError(
        400,
        "invalid_request_error",
        "too_many_images",
        `A conversation may hold at most ${PER_CONVERSATION} images; this one has ${held.size}. Start a new chat to send more.`,
      );
    }
  }
  const recent = await imagesOfLastDay(db, who);
  if (recent.images + fresh <= PER_OWNER_A_DAY) return;
  throw new ApiError(
    429,
    "rate_limit_exceeded",
    "rate_limit_exceeded",
    `vmpilot takes at most ${PER_OWNER_A_DAY} images a day from one person, and has ${recent.images} of yours. Try again in ${recent.retryAfterSeconds} s.`,
    { "retry-after": String(recent.retryAfterSeconds) },
  );
}

/** Deletes images past their time; run as new ones are stored, which is when the store grows. */
export const deleteExpiredImages = (db: Queryable) => deleteOldImages(db, RETENTION_DAYS);

/** Counts the images being read, per person and in all; past either, a request is refused unread. */
export class ImageReading {
  readonly #byPerson = new Map<string, number>();
  #total = 0;

  private readonly limits: typeof READING;

  constructor(limits = READING) {
    this.limits = limits;
  }

  /** Takes `count` places for the person, or throws 429 (theirs are taken) or 503 (all are); returns their release. */
  take(who: Principal, count: number): () => void {
    if (count === 0) return () => {};
    const person = who.kind === "operator" ? "operator" : String(who.id);
    const theirs = this.#byPerson.get(person) ?? 0;
    if (theirs + count > this.limits.perPerson) {
      throw new ApiError(
        429,
        "rate_limit_exceeded",
        "rate_limit_exceeded",
        `vmpilot reads at most ${this.limits.perPerson} images of one person at once, and is reading ${theirs} of yours; send this when they are done.`,
        { "retry-after": "5" },
      );
    }
    if (this.#total + count > this.limits.perProcess) {
      throw new ApiError(
        503,
        "server_error",
        "server_busy",
        "vmpilot is reading as many images as it may at once; try again in a few seconds.",
        { "retry-after": "5" },
      );
    }
    this.#byPerson.set(person, theirs + count);
    this.#total += count;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#total -= count;
      const left = (this.#byPerson.get(person) ?? count) - count;
      if (left > 0) this.#byPerson.set(person, left);
      else this.#byPerson.delete(person);
    };
  }
}
