// OpenTelemetry's SDK, started once per process when OTLP export is configured (config/tracing.ts):
// the app's spans (log/trace.ts) batched to the collector over OTLP/HTTP, every attribute, event
// and status message redacted on its way out as log lines are. Without that configuration nothing
// here runs, and the app's spans stay the API's no-ops.
import {
  type Attributes,
  context,
  type DiagLogger,
  DiagLogLevel,
  diag,
  type SpanStatus,
  trace,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME } from "@opentelemetry/semantic-conventions";
import type { TracingConfig } from "../config/tracing.ts";
import type { Logger } from "../log/logger.ts";
import { redact } from "../log/redact.ts";
import { traceToolContent } from "../log/trace.ts";

/**
 * Registers the SDK as the process's tracer provider, exporting to `config.url`; resolves the
 * returned stop once the spans still held are sent. One per process: the API keeps one provider.
 */
export function startTracing(
  config: TracingConfig,
  role: string,
  logger: Logger,
): () => Promise<void> {
  const exporter = new OTLPTraceExporter({ url: config.url, headers: config.headers });
  const provider = new BasicTracerProvider({
    resource: defaultResource()
      .merge(detectResources({ detectors: [envDetector] }))
      .merge(
        resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName, "vmpilot.role": role }),
      ),
    spanProcessors: [new BatchSpanProcessor(redacting(exporter))],
  });
  const contexts = new AsyncLocalStorageContextManager().enable();
  if (!context.setGlobalContextManager(contexts) || !trace.setGlobalTracerProvider(provider)) {
    contexts.disable();
    throw new Error("tracing is started already in this process");
  }
  // The SDK's own trouble (a collector that cannot be reached) in the app's log, not on stderr.
  diag.setLogger(diagLogger(logger), DiagLogLevel.WARN);
  traceToolContent(config.toolContent);
  return async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
    diag.disable();
    traceToolContent(false);
  };
}

function diagLogger(logger: Logger): DiagLogger {
  const warn = (message: string) => logger.warn({ source: "opentelemetry" }, message);
  const ignore = () => {};
  return { error: warn, warn, info: ignore, debug: ignore, verbose: ignore };
}

/** The exporter, sent the spans with their text redacted. */
function redacting(exporter: SpanExporter): SpanExporter {
  return {
    export: (spans, done) => exporter.export(spans.map(redacted), done),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  };
}

function redacted(span: ReadableSpan): ReadableSpan {
  return {
    name: redact(span.name),
    kind: span.kind,
    spanContext: () => span.spanContext(),
    parentSpanContext: span.parentSpanContext,
    startTime: span.startTime,
    endTime: span.endTime,
    status: redactedStatus(span.status),
    attributes: redactedAttributes(span.attributes),
    links: span.links.map((link) => ({
      ...link,
      attributes: link.attributes && redactedAttributes(link.attributes),
    })),
    events: span.events.map((event) => ({
      ...event,
      name: redact(event.name),
      attributes: event.attributes && redactedAttributes(event.attributes),
    })),
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

function redactedStatus(status: SpanStatus): SpanStatus {
  return status.message === undefined ? status : { ...status, message: redact(status.message) };
}

function redactedAttributes(attributes: Attributes): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) {
    if (typeof value === "string") out[key] = redact(value);
    else if (Array.isArray(value))
      out[key] = value.map((item) =>
        typeof item === "string" ? redact(item) : item,
      ) as typeof value;
    else out[key] = value;
  }
  return out;
}
