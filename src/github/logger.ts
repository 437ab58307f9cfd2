// The one logger of the process (Probot's `app.log` included). Every serialized line passes
// through secret redaction on its way out, whatever field or message the secret hides in.
import pino, { type DestinationStream, type Logger as PinoLogger } from "pino";
import { prettyFactory } from "pino-pretty";
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

export function createLogger(options: LoggerOptions): PinoLogger {
  const target = options.destination ?? pino.destination({ fd: 1, sync: false });
  const pretty =
    options.format === "pretty"
      ? prettyFactory({ ignore: "time,pid,hostname", colorize: false })
      : undefined;
  const stream: DestinationStream = {
    write(line: string) {
      const clean = redact(line);
      target.write(pretty ? pretty(clean) : clean);
    },
  };
  return pino(
    {
      name: "vmpilot",
      level: options.level,
      redact: { paths: REDACT_PATHS, censor: "[REDACTED]" },
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
