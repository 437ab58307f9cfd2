// Server-Sent Events for a running job's page. Polling job_events by id works the same on PGlite
// and PostgreSQL; the browser's EventSource resumes with Last-Event-ID after a reconnect.
import type { ServerResponse } from "node:http";
import { clientAddress } from "../http/client-address.ts";
import type { RequestContext, WebServices } from "./context.ts";
import { SECURITY_HEADERS } from "./http.ts";
import { viewableJob } from "./jobs.ts";
import { jobSpent } from "./jobs-view.ts";
import { renderEvent } from "./timeline.ts";

const HEARTBEAT_MS = 15_000;
// Streams end after this and the browser reconnects, which re-checks the viewer's access.
const MAX_STREAM_MS = 10 * 60_000;

export async function jobEvents(web: WebServices, ctx: RequestContext): Promise<void> {
  const job = await viewableJob(web, ctx);
  const { req, res } = ctx;
  // One address's streams, however it signs in (or not): the cap is on what it costs to serve.
  const release = web.feeds.admit(job.id, clientAddress(req, web.config.clientAddressHeader));
  if (!release) {
    res.writeHead(429, { ...SECURITY_HEADERS, "content-type": "text/plain", "retry-after": "30" });
    res.end("Too many live streams: reload the page later.");
    return;
  }
  const after = Math.max(
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
  let shown = jobSpent(job);
  const done = new Promise<void>((resolve) => {
    res.once("close", resolve);
    res.once("finish", resolve);
  });
  const heartbeat = setInterval(() => writeComment(res, "keep-alive"), HEARTBEAT_MS);
  const limit = setTimeout(() => res.end(), MAX_STREAM_MS);
  let unwatch = () => {};
  try {
    unwatch = await web.feeds.watch(job.id, {
      after,
      events(events) {
        for (const event of events) writeEvent(res, "step", renderEvent(event).value, event.id);
      },
      spent(job) {
        // The same figures as the header the page was built with; sent again only when they move.
        const text = jobSpent(job);
        if (text.tokens === shown.tokens && text.cost === shown.cost) return;
        shown = text;
        writeEvent(res, "spent", text);
      },
      status(now) {
        if (now === status) return;
        status = now;
        writeEvent(res, "status", now);
      },
      end(final) {
        this.status(final);
        writeEvent(res, "end", final);
        res.end();
      },
    });
    await done;
  } finally {
    unwatch();
    release();
    clearInterval(heartbeat);
    clearTimeout(limit);
    web.streams.delete(res);
    if (!res.writableEnded) res.end();
  }
}

/**
 * One `data:` line of JSON per event: JSON escapes CR and LF, so nothing in a tool's output can
 * start a field of its own (a forged `event: end` or `id:`).
 */
function writeEvent(res: ServerResponse, type: string, data: unknown, id?: number): void {
  if (res.writableEnded) return;
  res.write(
    `${id !== undefined ? `id: ${id}\n` : ""}event: ${type}\ndata: ${JSON.stringify(data)}\n\n`,
  );
}

function writeComment(res: ServerResponse, text: string): void {
  if (!res.writableEnded) res.write(`: ${text}\n\n`);
}
