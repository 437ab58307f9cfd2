// Where a running job reports: its job log (job_events, redacted), its cost on the job row,
// and its progress comment on GitHub (throttled).
import type { z } from "zod";
import type { AgentEvent } from "../../agent/events.ts";
import { describeToolCall } from "../../agent/tool-call.ts";
import type { UsageTotals } from "../../agent/usage.ts";
import {
  type ProgressStep,
  type ProgressView,
  renderProgress,
  type ThrottledComment,
} from "../../github/progress-comment.ts";
import type { Logger } from "../../log/logger.ts";
import { redact, redactDeep } from "../../log/redact.ts";
import { modelCost, modelTokens } from "../../metrics.ts";
import { AGENT_EVENTS, PipelineStep } from "../../store/job-event-kinds.ts";
import { appendJobEvent, type JobEventDefinition } from "../../store/job-events.ts";
import { updateJob } from "../../store/jobs.ts";
import type { Queryable } from "../../store/sql.ts";

// The page cuts outputs at 100,000 characters; storing more only grows the table.
const LOG_CAP = 200_000;
// The elapsed time moves on while a long test run or model request sends no events.
const HEARTBEAT_MS = 30_000;

function capped(text: string): string {
  return text.length > LOG_CAP
    ? `${text.slice(0, LOG_CAP)}\n[… ${text.length - LOG_CAP} characters cut]`
    : text;
}

/** What an agent event stores: its fields, redacted, outputs capped (its definition drops `type`). */
function eventData(event: AgentEvent): Record<string, unknown> {
  if (event.type === "compacted") {
    // The conversation is stored apart; not worth redacting only to be dropped.
    const { messages: _messages, ...logged } = event;
    return redactDeep(logged);
  }
  if (event.type !== "tool_result") return redactDeep(event);
  const log = event.log !== undefined ? { log: capped(event.log) } : {};
  return redactDeep({ ...event, output: capped(event.output), ...log });
}

/** The job's page, where its log is shown live. */
export function jobUrl(publicUrl: string, jobId: number): string {
  return `${publicUrl}/jobs/${jobId}`;
}

export interface JobProgressOptions {
  db: Queryable;
  jobId: number;
  /** The progress comment on GitHub; a chat turn has none. */
  comment?: ThrottledComment;
  view: ProgressView;
  /** What earlier attempts of this job spent. */
  baseCostUsd: number;
  logger: Logger;
  now?: () => number;
}

export class JobProgress {
  readonly view: ProgressView;
  readonly #o: JobProgressOptions;
  readonly #now: () => number;
  /** Writes go out in order, one after another; flush() waits for them. */
  #writes: Promise<void> = Promise.resolve();
  readonly #heartbeat: NodeJS.Timeout;

  constructor(options: JobProgressOptions) {
    this.#o = options;
    this.view = { ...options.view };
    this.#now = options.now ?? Date.now;
    this.#heartbeat = setInterval(() => this.#show(), HEARTBEAT_MS).unref();
  }

  /** Ends the elapsed-time refresh; for when the job's final comment is written. */
  stop(): void {
    clearInterval(this.#heartbeat);
  }

  /** Moves the checklist to `step` and logs a pipeline event. */
  step(step: ProgressStep, message?: string): void {
    this.view.current = step;
    if (message) this.log(PipelineStep, { step, message });
    this.#show();
  }

  /** A job-log event of the pipeline itself. */
  log<S extends z.ZodObject>(event: JobEventDefinition<string, S>, data: z.input<S>): void {
    const clean = redactDeep(data);
    this.#write(() => appendJobEvent(this.#o.db, this.#o.jobId, event, clean).then(() => {}));
  }

  readonly onEvent = (event: AgentEvent): void => {
    // Any of the loop's events: the definition of its type parses it.
    const definition: JobEventDefinition = AGENT_EVENTS[event.type];
    const data = eventData(event);
    this.#write(() => appendJobEvent(this.#o.db, this.#o.jobId, definition, data).then(() => {}));
    if (event.type === "tool_call") {
      this.view.activity = redact(describeToolCall(event.name, event.input));
    } else if (event.type === "usage") {
      countUsage(event.request);
      const costUsd = this.#o.baseCostUsd + event.totals.costUsd;
      this.view.costUsd = costUsd;
      this.view.priceKnown = event.priceKnown;
      const usage = { ...event.totals };
      this.#write(() => updateJob(this.#o.db, this.#o.jobId, { usage, costUsd }).then(() => {}));
    }
    this.#show();
  };

  /** Waits until every event so far is stored. */
  async flush(): Promise<void> {
    await this.#writes;
  }

  #show(): void {
    this.#o.comment?.update(renderProgress(this.view, this.#now()));
  }

  #write(task: () => Promise<void>): void {
    this.#writes = this.#writes.then(task).catch((error: unknown) => {
      this.#o.logger.warn({ err: error, jobId: this.#o.jobId }, "recording job progress failed");
    });
  }
}

function countUsage(request: UsageTotals): void {
  modelTokens.inc({ kind: "input" }, request.inputTokens);
  modelTokens.inc({ kind: "output" }, request.outputTokens);
  modelTokens.inc({ kind: "cache_read" }, request.cacheReadInputTokens);
  modelTokens.inc({ kind: "cache_write" }, request.cacheCreationInputTokens);
  modelCost.inc(request.costUsd);
}
