// What the chat face remembers of GitHub's answers, and how many questions it may ask. A listing
// of models asks about many repositories at once; without bounds, every key of every person cost a
// question per repository per request.

/**
 * The gate's answers per person: each person's at most about one per repository, people kept
 * while active; so all of it is about repositories × active people.
 */
export class PermitCache {
  readonly #people = new Map<number, { seen: number; answers: Map<string, Answer> }>();
  #swept = 0;
  #perPerson = 1000;

  /** How long an answer is kept, and a person without requests. */
  private readonly keepMs: number;
  private readonly now: () => number;

  constructor(keepMs: number, now: () => number = Date.now) {
    this.keepMs = keepMs;
    this.now = now;
  }

  /** The answer for the person under `key`, if one is no older than `maxAgeMs`. */
  get(person: number, key: string, maxAgeMs: number): boolean | undefined {
    const now = this.now();
    this.#sweep(now);
    const mine = this.#people.get(person);
    if (!mine) return undefined;
    mine.seen = now;
    const answer = mine.answers.get(key);
    return answer && now - answer.at <= maxAgeMs ? answer.allowed : undefined;
  }

  /** How many answers a person keeps: the repositories there are now. */
  size(repositories: number): void {
    this.#perPerson = Math.max(1, repositories);
  }

  /** Remembers an answer; past the size, the person's oldest goes. */
  set(person: number, key: string, allowed: boolean): void {
    const now = this.now();
    let mine = this.#people.get(person);
    if (!mine) {
      mine = { seen: now, answers: new Map() };
      this.#people.set(person, mine);
    }
    mine.answers.delete(key);
    while (mine.answers.size >= this.#perPerson) {
      const oldest = mine.answers.keys().next().value;
      if (oldest === undefined) break;
      mine.answers.delete(oldest);
    }
    mine.answers.set(key, { allowed, at: now });
  }

  #sweep(now: number): void {
    if (now - this.#swept < this.keepMs / 10) return;
    this.#swept = now;
    for (const [person, mine] of this.#people) {
      if (now - mine.seen > this.keepMs) this.#people.delete(person);
    }
  }
}

interface Answer {
  allowed: boolean;
  at: number;
}

/** Thrown when a question to GitHub would go over the person's budget for this minute. */
export class BudgetSpent extends Error {
  readonly retryAfterSeconds: number;
  constructor(retryAfterSeconds: number) {
    super(`your GitHub budget for this minute is spent; try again in ${retryAfterSeconds} s`);
    this.retryAfterSeconds = retryAfterSeconds;
    this.name = "BudgetSpent";
  }
}

/**
 * Questions to GitHub per person per minute, on this web process: each person has their own, so
 * one person's questions never leave another without answers.
 */
export class CallBudget {
  readonly #people = new Map<number, { windowStart: number; used: number }>();
  #swept = Number.NEGATIVE_INFINITY;

  readonly perMinute: number;
  private readonly now: () => number;

  constructor(perMinute: number, now: () => number = Date.now) {
    this.perMinute = perMinute;
    this.now = now;
  }

  /** Counts the person's questions, or throws BudgetSpent when they do not all fit. */
  spend(person: number, questions = 1): void {
    const now = this.now();
    this.#sweep(now);
    let mine = this.#people.get(person);
    if (!mine || now - mine.windowStart >= 60_000) {
      mine = { windowStart: now, used: 0 };
      this.#people.set(person, mine);
    }
    if (mine.used + questions > this.perMinute) {
      throw new BudgetSpent(Math.max(1, Math.ceil((mine.windowStart + 60_000 - now) / 1000)));
    }
    mine.used += questions;
  }

  /** People whose minute is over are forgotten, a minute at a time. */
  #sweep(now: number): void {
    if (now - this.#swept < 60_000) return;
    this.#swept = now;
    for (const [person, mine] of this.#people) {
      if (now - mine.windowStart >= 60_000) this.#people.delete(person);
    }
  }
}
