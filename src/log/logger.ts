// The one logger of the process (Probot's `app.log` included). Every serialized line passes
// through secret redaction on its way out, whatever field or message the secret hides in, and
// then through the field cap. Webhook payloads never reach it: see the serializers below.
import pino, { type DestinationStream, type Logger as PinoLogger } from "pino";
import { prettyFactory } from "pino-pretty";
import { capLogLine } from "./log-cap.ts";
import { redact } from "./redact.ts";

/**
 * The one logger type every layer takes: the part of pino's logger the code calls. Probot's and
 * pino's loggers fit, and tests pass recording fakes.
 */
export type Logger = Pick<PinoLogger, "debug" | "info" | "warn" | "error">;

export interface LoggerOptions {
  level: string;
  format: "json" | "pretty";
  /** Where lines go; default stdout. */
  destination?: { write(line: string): unknown };
}

// Known secret-bearing fields are censored by name before the pattern pass sees them.
const REDACT_PATHS = [
  "token",
  "*.token",
  "privateKey",
  "*.privateKey",
  "secret",
  "*.secret",
  "webhookSecret",
  "apiKey",
  "*.apiKey",
  "authorization",
  "*.authorization",
  "headers.authorization",
  "*.headers.authorization",
  "*.headers.cookie",
  "*.headers['x-hub-signature-256']",
];

/** A webhook event as logs may name it: which delivery, never its payload or signature. */
function eventRef(event: unknown): unknown {
  if (!event || typeof event !== "object") return event;
  const { id, name } = event as { id?: unknown; name?: unknown };
  return { id, name };
}

type SerializedError = Record<string, unknown> & { aggregateErrors?: SerializedError[] };

// @octokit/webhooks attaches the event (the raw body, on a bad signature) to its errors, and
// Probot logs them whole; Octokit's request errors carry the request body.
function withoutPayload(err: SerializedError): SerializedError {
  if ("event" in err) err.event = eventRef(err.event);
  delete err.body;
  const request = err.request;
  if (request && typeof request === "object" && "body" in request) {
    const { body: _, ...rest } = request as Record<string, unknown>;
    err.request = rest;
  }
  err.aggregateErrors?.forEach(withoutPayload);
  return err;
}

const SERIALIZERS = {
  err: (err: unknown) => {
    const serialized = pino.stdSerializers.err(err as Error);
    return serialized && typeof serialized === "object"
      ? withoutPayload(serialized as unknown as SerializedError)
      : serialized;
  },
  // Probot logs `{ event }` at debug for every delivery it receives.
  event: eventRef,
};

export function createLogger(options: LoggerOptions): PinoLogger {
  const target = options.destination ?? pino.destination({ fd: 1, sync: false });
  const pretty =
    options.format === "pretty"
      ? prettyFactory({ ignore: "time,pid,hostname", colorize: false })
      : undefined;
  const stream: DestinationStream = {
    write(line: string) {
      // Redacted before it is cut: a secret cut in half would no longer match its pattern.
      const clean = capLogLine(redact(line));
      target.write(pretty ? pretty(clean) : clean);
    },
  };
  return pino(
    {
      name: "vmpilot",
      level: options.level,
      redact: { paths: REDACT_PATHS, censor: "[REDACTED]" },
      serializers: SERIALIZERS,
    },
    stream,
  );
}

let fallback: Logger | undefined;

/** For a component started without a logger (tools, benches): info and up, to stdout, redacted. */
export function fallbackLogger(): Logger {
  fallback ??= createLogger({ level: "info", format: "json" });
  return fallback;
}

/** For callers that want no log lines (tests, the store by default). */
export const silentLogger: Logger = createLogger({
  level: "silent",
  format: "json",
  destination: { write() {} },
});
