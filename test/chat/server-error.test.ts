// An unexpected failure is OpenAI's 500 with a request id, and the log has the cause under it.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { expect, it } from "vitest";
import { mountChatFace } from "../../src/chat/server.ts";
import { defaults } from "../../src/config/repo-config.ts";
import type { Logger } from "../../src/log/logger.ts";
import type { Database } from "../../src/store/database.ts";

it("answers a failure it did not expect with a 500 naming a request id the log has too", async () => {
  const logged: Array<Record<string, unknown>> = [];
  const broken = {
    query: () => Promise.reject(new Error("connection terminated")),
  };
  const face = mountChatFace({
    db: { pool: broken } as unknown as Database,
    queue: { enqueueJob: async () => {}, wake: () => {}, cancel: async () => "finished" },
    auth: () => Promise.reject(new Error("unused")),
    allowedUsers: [],
    cloneUrl: (name) => name,
    defaults,
    logger: {
      error: (fields: Record<string, unknown>) => logged.push(fields),
    } as unknown as Logger,
  });
  const server = createServer((req, res) => void face.handler(req, res));
  server.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  try {
    const client = new OpenAI({
      apiKey: `vmp_${"x".repeat(43)}`,
      baseURL: `http://127.0.0.1:${port}/v1`,
      maxRetries: 0,
    });
    const error = await client.models.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.InternalServerError);
    const requestId = (error as InstanceType<typeof OpenAI.InternalServerError>).headers?.get(
      "x-request-id",
    );
    expect(requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect((error as Error).message).toContain(`request id ${requestId}`);
    expect(logged).toEqual([expect.objectContaining({ requestId, path: "/v1/models" })]);
  } finally {
    server.close();
  }
});
