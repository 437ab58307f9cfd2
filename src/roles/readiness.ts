/**
 * What this process still waits for before it can serve: GitHub at startup, or a usable sandbox.
 * /healthz answers 503 while anything is waiting, so load balancers keep traffic away.
 */
export class Readiness {
  readonly #waiting = new Map<string, string>();

  wait(part: string, why: string): void {
    this.#waiting.set(part, why);
  }

  ready(part: string): void {
    this.#waiting.delete(part);
  }

  waiting(): Record<string, string> {
    return Object.fromEntries(this.#waiting);
  }
}
