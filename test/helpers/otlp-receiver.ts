// A loopback OpenTelemetry collector: takes OTLP/HTTP exports at /v1/traces in the JSON encoding
// (ExportTraceServiceRequest, as a collector's otlp receiver decodes it), answers as a collector
// does, and keeps each span flat with its resource. Anything else it is sent is a problem.
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";

type Value = string | number | boolean | Value[] | undefined;

interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
}

const AnyValue: z.ZodType<AnyValue> = z.lazy(() =>
  z.strictObject({
    stringValue: z.string().optional(),
    boolValue: z.boolean().optional(),
    // int64: a string in proto3's JSON mapping, though some encoders send a number.
    intValue: z.union([z.string(), z.number()]).optional(),
    doubleValue: z.number().optional(),
    arrayValue: z.object({ values: z.array(AnyValue).optional() }).optional(),
  }),
);
const Attributes = z.array(z.object({ key: z.string(), value: AnyValue })).default([]);
const Nanos = z.union([z.string(), z.number()]).transform(Number);
const Span = z.object({
  traceId: z.string().regex(/^[0-9a-f]{32}$/),
  spanId: z.string().regex(/^[0-9a-f]{16}$/),
  parentSpanId: z.string().optional(),
  name: z.string(),
  kind: z.number().int(),
  startTimeUnixNano: Nanos,
  endTimeUnixNano: Nanos,
  attributes: Attributes,
  events: z.array(z.object({ name: z.string(), attributes: Attributes })).default([]),
  status: z.object({ code: z.number().optional(), message: z.string().optional() }).optional(),
});
const ExportTraceServiceRequest = z.object({
  resourceSpans: z.array(
    z.object({
      resource: z.object({ attributes: Attributes }).optional(),
      scopeSpans: z.array(z.object({ spans: z.array(Span) })),
    }),
  ),
});

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Undefined for a root span. */
  parentSpanId?: string;
  name: string;
  kind: number;
  startMs: number;
  endMs: number;
  attributes: Record<string, Value>;
  resource: Record<string, Value>;
  status?: { code?: number; message?: string };
}

export interface OtlpReceiver {
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT would name it. */
  url: string;
  spans: ReceivedSpan[];
  /** Every export's body as sent, to search for what must never be in one. */
  bodies: string[];
  headers: IncomingHttpHeaders[];
  /** Requests it could not take. */
  problems: string[];
  close(): Promise<void>;
}

function plainValue(value: AnyValue): Value {
  if (value.arrayValue) return (value.arrayValue.values ?? []).map(plainValue);
  if (value.intValue !== undefined) return Number(value.intValue);
  return value.stringValue ?? value.boolValue ?? value.doubleValue;
}

function attributesOf(list: z.output<typeof Attributes>): Record<string, Value> {
  return Object.fromEntries(list.map(({ key, value }) => [key, plainValue(value)]));
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const headers: IncomingHttpHeaders[] = [];
  const problems: string[] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString("utf8");
    const type = req.headers["content-type"] ?? "";
    if (req.method !== "POST" || req.url !== "/v1/traces" || !type.startsWith("application/json")) {
      problems.push(`${req.method} ${req.url} (${type})`);
      res.writeHead(404).end();
      return;
    }
    const parsed = ExportTraceServiceRequest.safeParse(JSON.parse(body));
    if (!parsed.success) {
      problems.push(`an export that is no ExportTraceServiceRequest: ${parsed.error.message}`);
      res.writeHead(400).end();
      return;
    }
    bodies.push(body);
    headers.push(req.headers);
    for (const { resource, scopeSpans } of parsed.data.resourceSpans) {
      for (const span of scopeSpans.flatMap((scope) => scope.spans)) {
        spans.push({
          traceId: span.traceId,
          spanId: span.spanId,
          ...(span.parentSpanId && { parentSpanId: span.parentSpanId }),
          name: span.name,
          kind: span.kind,
          startMs: span.startTimeUnixNano / 1e6,
          endMs: span.endTimeUnixNano / 1e6,
          attributes: attributesOf(span.attributes),
          resource: attributesOf(resource?.attributes ?? []),
          ...(span.status && { status: span.status }),
        });
      }
    }
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    headers,
    problems,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
