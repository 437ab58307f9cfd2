// OpenTelemetry's own variables for exporting traces over OTLP (docs/tracing.md), read like the
// rest of the environment (env.ts). Tracing is on when an OTLP endpoint is set, unless the SDK or
// the traces exporter is turned off; with none set nothing of the SDK starts.
import { z } from "zod";

export interface TracingConfig {
  /** Where spans are POSTed: the traces endpoint as given, or the endpoint with /v1/traces. */
  url: string;
  /** Sent with every export (often the backend's API key): the traces' own over the shared ones. */
  headers: Record<string, string>;
  serviceName: string;
  /** The tool calls' commands and output on their spans, redacted; off, only their lengths. */
  toolContent: boolean;
}

const endpoint = z
  .string()
  .refine(
    (value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol),
    "must be an http(s) URL such as http://localhost:4318",
  )
  .optional();

const flag = z
  .string()
  .toLowerCase()
  .pipe(z.enum(["true", "false"], "must be true or false"))
  .transform((value) => value === "true")
  .default(false);

/** `key=value,key2=value2`, values percent-encoded; a problem never repeats a value (secrets). */
const headerList = z
  .string()
  .transform((text, ctx) => {
    const headers: Record<string, string> = {};
    for (const pair of text.split(",")) {
      if (!pair.trim()) continue;
      const at = pair.indexOf("=");
      const name = pair.slice(0, at).trim();
      const value = at > 0 ? decoded(pair.slice(at + 1).trim()) : undefined;
      if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(name) || value === undefined) {
        ctx.addIssue({ code: "custom", message: "must be comma-separated name=value pairs" });
        return z.NEVER;
      }
      headers[name.toLowerCase()] = value;
    }
    return headers;
  })
  .optional();

function decoded(value: string): string | undefined {
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

const protocol = z
  .enum(
    ["http/json", "http/protobuf"],
    "must be http/json or http/protobuf: vmpilot sends OTLP over HTTP, in JSON, which collectors take on the same endpoint (not grpc)",
  )
  .optional();

/** Read by env.ts with the rest: `field: [VARIABLE, schema]`. */
export const TRACING = {
  endpoint: ["OTEL_EXPORTER_OTLP_ENDPOINT", endpoint],
  tracesEndpoint: ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint],
  headers: ["OTEL_EXPORTER_OTLP_HEADERS", headerList],
  tracesHeaders: ["OTEL_EXPORTER_OTLP_TRACES_HEADERS", headerList],
  protocol: ["OTEL_EXPORTER_OTLP_PROTOCOL", protocol],
  tracesProtocol: ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", protocol],
  exporter: [
    "OTEL_TRACES_EXPORTER",
    z.enum(["otlp", "none"], "must be otlp or none (vmpilot exports over OTLP only)").optional(),
  ],
  disabled: ["OTEL_SDK_DISABLED", flag],
  serviceName: ["OTEL_SERVICE_NAME", z.string().default("vmpilot")],
  toolContent: ["VMPILOT_TRACE_TOOL_CONTENT", flag],
} as const;

type Variables = z.output<z.ZodObject<{ [F in keyof typeof TRACING]: (typeof TRACING)[F][1] }>>;

/** Where and how to export, or undefined: no endpoint, or tracing turned off. */
export function tracingConfig(v: Variables): TracingConfig | undefined {
  if (v.disabled || v.exporter === "none") return undefined;
  const url = v.tracesEndpoint ?? (v.endpoint && `${v.endpoint.replace(/\/*$/, "")}/v1/traces`);
  if (!url) return undefined;
  return {
    url,
    headers: { ...v.headers, ...v.tracesHeaders },
    serviceName: v.serviceName,
    toolContent: v.toolContent,
  };
}
