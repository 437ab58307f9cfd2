// The job's one progress comment: what it says while the job runs, when it ends, and when it
// fails, plus an updater that edits it in place without hammering the API.

import { redact } from "../log/redact.ts";
import { jobMarker } from "./comments.ts";
import { codeSpan, quietMentions } from "./markdown.ts";

// Its callers (pull request, review) import it from here.
export { quietMentions };

const PROGRESS_STEPS = [
  { key: "acknowledged", label: "Acknowledged" },
  { key: "workspace", label: "Workspace ready" },
  { key: "agent", label: "Agent working" },
  { key: "tests", label: "Tests" },
  { key: "pushed", label: "Pushed" },
  { key: "pull_request", label: "Pull request" },
] as const;

export type ProgressStep = (typeof PROGRESS_STEPS)[number]["key"];

/** What the comment shows while the job runs. */
export interface ProgressView {
  jobId: number;
  jobUrl: string;
  /** The steps this job goes through, in order; default all (a plan has no push or PR). */
  steps?: readonly ProgressStep[];
  /** Steps before it are done. */
  current: ProgressStep;
  /** The latest tool activity, e.g. "bash: npm test". */
  activity?: string;
  startedAt: number;
  costUsd: number;
  /** False when the model's price is unknown and the cost is an estimate at fallback prices. */
  priceKnown?: boolean;
}

export interface TestsSummary {
  outcome: "passed" | "failed" | "not_run";
  command?: string;
  explanation?: string;
}

/** What a job's run took: the one line its final comment and its pull request show. */
export interface RunCost {
  /** The model id the job ran with. */
  model: string;
  /** The agent's steps: its requests to the model. */
  steps: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadInputTokens: number;
  cacheCreationInputTokens: number;
  costUsd: number;
  priceKnown?: boolean;
}

/** What the comment shows when the job ended without an error. */
export interface FinalView {
  jobId: number;
  jobUrl: string;
  /** One line: what happened, e.g. "Opened draft pull request #12". */
  headline: string;
  ok: boolean;
  pullRequest?: { number: number; url: string };
  /** The agent's closing words, or the plan. */
  summary?: string;
  /** Why the job stopped early (a limit), or what to do next. */
  notes?: string[];
  tests?: TestsSummary;
  /** False when the job left the code as it was: no test report was needed then. */
  changed?: boolean;
  /** What the run took; null when the repository turned the line off (`showCost: false`). */
  cost: RunCost | null;
  startedAt: number;
  finishedAt: number;
}

export interface FailureView {
  jobId: number;
  jobUrl: string;
  reason: string;
  /** The command word, for the `/<word> retry` hint. */
  command: string;
  startedAt: number;
  finishedAt: number;
  costUsd: number;
}

const SUMMARY_CAP = 6_000;
const ACTIVITY_CAP = 120;
const REASON_CAP = 300;

export function formatDuration(ms: number): string {
  const total = Math.max(0, Math.round(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h ${String(m).padStart(2, "0")}m`;
  if (m > 0) return `${m}m ${String(s).padStart(2, "0")}s`;
  return `${s}s`;
}

/** An unknown price is never shown as a plain figure: the figure is a fallback estimate. */
export function formatCost(usd: number, priceKnown = true): string {
  const figure = `$${usd < 1 ? usd.toFixed(4) : usd.toFixed(2)}`;
  return priceKnown ? figure : `unknown (the model's price is not known; estimated ~${figure})`;
}

function oneLine(text: string, cap: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > cap ? `${flat.slice(0, cap - 1)}…` : flat;
}

function cap(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max)}\n\n…(cut, see the job page)` : text;
}

function header(icon: string, title: string, view: { jobId: number; jobUrl: string }): string {
  return `${icon} **${title}** — [job #${view.jobId}](${view.jobUrl})`;
}

export function renderProgress(view: ProgressView, now: number): string {
  const steps = view.steps ?? PROGRESS_STEPS.map((s) => s.key);
  const index = steps.indexOf(view.current);
  const lines = [header("⏳", "vmpilot is working", view), ""];
  steps.forEach((key, i) => {
    const label = PROGRESS_STEPS.find((s) => s.key === key)?.label ?? key;
    if (i < index) lines.push(`- ✔ ${label}`);
    else if (i === index) lines.push(`- ⏳ **${label}**`);
    else lines.push(`- ◻ ${label}`);
  });
  lines.push("");
  if (view.activity) lines.push(`Latest: ${codeSpan(oneLine(view.activity, ACTIVITY_CAP))}`, "");
  lines.push(
    `Elapsed ${formatDuration(now - view.startedAt)} · cost so far ${formatCost(view.costUsd, view.priceKnown)}`,
    "",
    jobMarker(view.jobId),
  );
  return lines.join("\n");
}

function testsLine(tests: TestsSummary | undefined, changed: boolean | undefined): string {
  if (!tests) return changed === false ? "- Tests: not run (no changes)" : "- Tests: not reported";
  const command = tests.command ? ` (${codeSpan(tests.command)})` : "";
  const why = tests.explanation ? `: ${oneLine(tests.explanation, 300)}` : "";
  if (tests.outcome === "passed") return `- Tests: ✔ passed${command}`;
  if (tests.outcome === "failed") return `- Tests: ✖ failed${command}${why}`;
  return `- Tests: not run${why}`;
}

/** Model, steps, tokens with the share read from the prompt cache, cost and wall time. */
export function costLine(cost: RunCost, durationMs: number): string {
  const n = (value: number) => value.toLocaleString("en-US");
  const input = cost.inputTokens + cost.cacheReadInputTokens + cost.cacheCreationInputTokens;
  const cached = input > 0 ? Math.round((cost.cacheReadInputTokens / input) * 100) : 0;
  return [
    codeSpan(cost.model),
    `${n(cost.steps)} ${cost.steps === 1 ? "step" : "steps"}`,
    `${n(input)} tokens in (${cached}% cached), ${n(cost.outputTokens)} out`,
    formatCost(cost.costUsd, cost.priceKnown),
    formatDuration(durationMs),
  ].join(" · ");
}

export function renderFinal(view: FinalView): string {
  const lines = [header(view.ok ? "✅" : "⚠️", view.headline, view), ""];
  if (view.pullRequest) {
    lines.push(`Pull request: [#${view.pullRequest.number}](${view.pullRequest.url})`, "");
  }
  for (const note of view.notes ?? []) lines.push(`> ${oneLine(note, 500)}`, "");
  if (view.summary?.trim()) {
    lines.push(quietMentions(cap(view.summary.trim(), SUMMARY_CAP)), "");
  }
  lines.push(testsLine(view.tests, view.changed));
  if (view.cost) lines.push(`- Run: ${costLine(view.cost, view.finishedAt - view.startedAt)}`);
  lines.push("", jobMarker(view.jobId));
  return lines.join("\n");
}

export function renderFailure(view: FailureView): string {
  return [
    header("❌", "vmpilot failed", view),
    "",
    `Reason: ${quietMentions(oneLine(redact(view.reason), REASON_CAP))}`,
    "",
    `Comment ${codeSpan(`/${view.command} retry`)} to try again. ` +
      `Time: ${formatDuration(view.finishedAt - view.startedAt)} · cost: ${formatCost(view.costUsd)}`,
    "",
    jobMarker(view.jobId),
  ].join("\n");
}

/** A short final answer that is neither a result nor a failure (nothing to retry, a fork, a cap). */
export function renderNotice(view: {
  jobId: number;
  jobUrl: string;
  icon: string;
  headline: string;
  text: string;
}): string {
  return [header(view.icon, view.headline, view), "", view.text, "", jobMarker(view.jobId)].join(
    "\n",
  );
}

export interface CommentTimers {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: CommentTimers = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface ThrottledCommentOptions {
  /** Replaces the comment's body (e.g. editComment bound to the comment). */
  edit(body: string): Promise<void>;
  /** Least time between two edits; default 5 s. */
  intervalMs?: number;
  timers?: CommentTimers;
  /** An intermediate edit failed; the next one will try again. */
  onError?(error: unknown): void;
}

/**
 * Edits one comment in place at most once per interval: the latest body wins, bodies in between
 * are dropped, and `finish` always writes the final body. Every body is redacted.
 */
export class ThrottledComment {
  readonly #edit: (body: string) => Promise<void>;
  readonly #interval: number;
  readonly #timers: CommentTimers;
  readonly #onError: (error: unknown) => void;
  #pending: string | undefined;
  #sent: string | undefined;
  #lastAt = Number.NEGATIVE_INFINITY;
  #timer: unknown;
  #inFlight: Promise<void> | undefined;
  #finished = false;

  constructor(options: ThrottledCommentOptions) {
    this.#edit = options.edit;
    this.#interval = options.intervalMs ?? 5_000;
    this.#timers = options.timers ?? realTimers;
    this.#onError = options.onError ?? (() => {});
  }

  /** Shows `body` now if the last edit is old enough, else when the interval is up. */
  update(body: string): void {
    if (this.#finished) return;
    this.#pending = redact(body);
    this.#schedule();
  }

  /** Waits for an edit in flight, then writes `body` whatever the interval; later updates are ignored. */
  async finish(body: string): Promise<void> {
    this.#finished = true;
    this.#pending = undefined;
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#inFlight;
    const clean = redact(body);
    if (clean === this.#sent) return;
    this.#lastAt = this.#timers.now();
    await this.#edit(clean);
    this.#sent = clean;
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#inFlight) return;
    const wait = this.#lastAt + this.#interval - this.#timers.now();
    if (wait <= 0) {
      this.#send();
      return;
    }
    this.#timer = this.#timers.setTimeout(() => {
      this.#timer = undefined;
      this.#send();
    }, wait);
  }

  #send(): void {
    const body = this.#pending;
    this.#pending = undefined;
    if (body === undefined || body === this.#sent || this.#finished) return;
    this.#lastAt = this.#timers.now();
    this.#inFlight = this.#edit(body)
      .then(
        () => {
          this.#sent = body;
        },
        (error) => this.#onError(error),
      )
      .finally(() => {
        this.#inFlight = undefined;
        if (this.#pending !== undefined && !this.#finished) this.#schedule();
      });
  }
}
