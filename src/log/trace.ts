// Spans of one job's trace, from its delivery to its pull request (docs/tracing.md). The app speaks
// only OpenTelemetry's API: unless roles/tracing.ts started the SDK (OTLP export configured),
// every span here is the API's no-op, an object and no more. Attributes are redacted on their way
// out, by the SDK's exporter, like log lines.
import {
  type Attributes,
  type Context,
  context,
  isSpanContextValid,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from "@opentelemetry/api";

export { SpanKind };

const tracer = trace.getTracer("vmpilot");

/** Whether tool calls' commands and output go on their spans (VMPILOT_TRACE_TOOL_CONTENT). */
let toolContent = false;

export function traceToolContent(on: boolean): void {
  toolContent = on;
}

export function toolContentTraced(): boolean {
  return toolContent;
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The span's parent; default the active one. */
  parent?: Context;
}

/**
 * Runs `work` in a new span, which is the active one inside it; ends the span when `work` settles,
 * marked failed if it throws.
 */
export function inSpan<T>(
  name: string,
  options: SpanOptions,
  work: (span: Span) => Promise<T>,
): Promise<T> {
  const { parent = context.active(), ...rest } = options;
  return tracer.startActiveSpan(name, rest, parent, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      failed(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** Marks the span failed with the error (its message is redacted on export). */
function failed(span: Span, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  span.setAttribute("error.type", error instanceof Error ? error.name : "error");
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/** Sets attributes on the active span, if any (what a step found out, e.g. the job it queued). */
export function annotate(attributes: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attributes);
}

/** A span of time already past, such as a job's wait in the queue, under `parent`. */
export function pastSpan(
  name: string,
  parent: Context,
  startTime: number,
  attributes: Attributes,
): void {
  tracer.startSpan(name, { attributes, startTime }, parent).end();
}

/**
 * The W3C traceparent of the active span, which carries the trace through the queue to the
 * process that runs the job; undefined when nothing is traced.
 */
export function traceparent(): string | undefined {
  const span = trace.getActiveSpan()?.spanContext();
  if (!span || !isSpanContextValid(span)) return undefined;
  const sampled = span.traceFlags & TraceFlags.SAMPLED ? "01" : "00";
  return `00-${span.traceId}-${span.spanId}-${sampled}`;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The context a stored traceparent stands for; the root (a new trace) for none or a malformed one. */
export function traceContext(parent: string | undefined): Context {
  const match = parent === undefined ? null : TRACEPARENT.exec(parent);
  if (!match) return ROOT_CONTEXT;
  const [, traceId = "", spanId = "", flags = "00"] = match;
  const span = {
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  };
  return isSpanContextValid(span) ? trace.setSpanContext(ROOT_CONTEXT, span) : ROOT_CONTEXT;
}
