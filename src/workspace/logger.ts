import { type Logger, pino } from "pino";

/** The part of a pino logger the workspace layer uses; tests pass a recording fake. */
export type WorkspaceLogger = Pick<Logger, "warn" | "info" | "debug">;

let fallback: WorkspaceLogger | undefined;

export function defaultLogger(): WorkspaceLogger {
  fallback ??= pino({ name: "workspace" });
  return fallback;
}
