// Server-Sent Events for a running job's page. Polling job_events by id works the same on PGlite
// and PostgreSQL; the browser's EventSource resumes with Last-Event-ID after a reconnect.
import type { ServerResponse } from "node:http";
import { listJobEvents } from "../store/job-events.ts";
import { getJob } from "../store/jobs.ts";
import type { RequestContext, WebServices } from "./context.ts";
import { SECURITY_HEADERS } from "./http.ts";
import { viewableJob } from "./jobs.ts";
import { renderEvent } from "./timeline.ts";

const HEARTBEAT_MS = 15_000;
// Streams end after this and the browser reconnects, which re-checks the viewer's access.
const MAX_STREAM_MS = 10 * 60_000;
const BATCH = 200;

export async function jobEvents(web: WebServices, ctx: RequestContext): Promise<void> {
  const job = await viewableJob(web, ctx);
  const { req, res } = ctx;
  let after = Math.max(
    Number(req.headers["last-event-id"]) || 0,
    Number(ctx.url.searchParams.get("after")) || 0,
  );
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-store",
    "x-accel-buffering": "no",
  });
  res.write("retry: 2000\n\n");
  web.streams.add(res);
  let status = job.status;
  const started = Date.now();
  let lastWrite = started;
  const interval = web.config.pollIntervalMs ?? 500;
  try {
    while (!res.closed && !res.writableEnded) {
      // Status first: events written before the job finished are then certain to be read below.
      const current = await getJob(web.pool, job.id);
      const events = await listJobEvents(web.pool, job.id, after, BATCH);
      for (const event of events) {
        writeEvent(res, "step", renderEvent(event).value, event.id);
        after = event.id;
      }
      if (events.length) lastWrite = Date.now();
      if (current && current.status !== status) {
        status = current.status;
        writeEvent(res, "status", status);
      }
      if (!current || (current.finishedAt && events.length < BATCH)) {
        writeEvent(res, "end", status);
        break;
      }
      if (Date.now() - started > MAX_STREAM_MS) break;
      if (Date.now() - lastWrite > HEARTBEAT_MS) {
        res.write(": keep-alive\n\n");
        lastWrite = Date.now();
      }
      if (events.length < BATCH) await pause(res, interval);
    }
  } finally {
    web.streams.delete(res);
    if (!res.writableEnded) res.end();
  }
}

/**
 * One `data:` line of JSON per event: JSON escapes CR and LF, so nothing in a tool's output can
 * start a field of its own (a forged `event: end` or `id:`).
 */
function writeEvent(res: ServerResponse, type: string, data: string, id?: number): void {
  if (res.writableEnded) return;
  res.write(
    `${id !== undefined ? `id: ${id}\n` : ""}event: ${type}\ndata: ${JSON.stringify(data)}\n\n`,
  );
}

/** Waits for the next poll, or less if the client goes away or the server shuts the stream. */
function pause(res: ServerResponse, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      res.off("close", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    res.once("close", done);
  });
}
