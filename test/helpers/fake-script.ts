// What both model fakes do with a request before answering it in their own wire format: read and
// record it, check it as the real API would, and take the next scripted reply.
import type { IncomingMessage, Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { RecordedRequest } from "./anthropic-fake.ts";

export interface FakeScript<Step> {
  queue: Step[];
  requests: RecordedRequest[];
  problems: string[];
}

/** Why a request gets an error instead of a scripted reply. */
export type Refusal = { kind: "route" | "invalid" | "script"; message: string };

export async function takeTurn<Reply>(
  req: IncomingMessage,
  path: string,
  script: FakeScript<Reply | ((request: RecordedRequest, index: number) => Reply | Promise<Reply>)>,
  // biome-ignore lint/suspicious/noExplicitAny: raw request JSON.
  validate: (body: any) => string | undefined,
): Promise<{ request: RecordedRequest; reply: Reply } | Refusal> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  if (req.method !== "POST" || req.url?.split("?")[0] !== path) {
    return { kind: "route", message: `fake: no route ${req.method} ${req.url}` };
  }
  const request: RecordedRequest = {
    body: JSON.parse(Buffer.concat(chunks).toString("utf8")),
    headers: req.headers,
  };
  script.requests.push(request);
  const n = script.requests.length;
  const invalid = validate(request.body);
  if (invalid) {
    script.problems.push(invalid);
    return { kind: "invalid", message: invalid };
  }
  const step = script.queue.shift();
  if (!step) {
    const message = `fake: no scripted reply for request #${n}`;
    script.problems.push(message);
    return { kind: "script", message };
  }
  try {
    // A step may take its time: a model mid-reply while the test does something else.
    const reply = await (typeof step === "function"
      ? (step as (request: RecordedRequest, index: number) => Reply | Promise<Reply>)(
          request,
          n - 1,
        )
      : step);
    return { request, reply };
  } catch (error) {
    // A failed expectation inside a scripted step must fail the run, not hang the request.
    const message = `fake: step for request #${n} threw: ${error instanceof Error ? error.message : error}`;
    script.problems.push(message);
    return { kind: "script", message };
  }
}

/** Starts the fake on a loopback port; what both fakes hand their tests besides their records. */
export async function listen<Step>(server: Server, queue: Step[]) {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    push: (...steps: Step[]) => {
      queue.push(...steps);
    },
    pending: () => queue.length,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
