// A ready check waits in pg-boss across an upgrade: one queued before migration 023 named its
// conversation chatId, and must still run after it.
import type { Job } from "pg-boss";
import { describe, expect, it } from "vitest";
import { type ReadyCheck, readyChecks } from "../../src/jobs/queue/ready-checks.ts";

function received(data: unknown): Promise<ReadyCheck> {
  return new Promise((resolve) => {
    const signal = new AbortController().signal;
    const message = { id: "1", name: readyChecks.name, data, signal } as unknown as Job<unknown>;
    void readyChecks.handler(async (check) => resolve(check))(message);
  });
}

describe("ready checks", () => {
  it("runs a check as queued now, and one queued before conversations were so named", async () => {
    const now = { conversationId: 7, sha: "abc", grace: false };
    expect(await received(now)).toEqual(now);
    expect(await received({ chatId: 7, sha: "abc", grace: false })).toEqual(now);
  });

  it("refuses a check that names no conversation", async () => {
    const handle = readyChecks.handler(async () => {});
    const message = { data: { sha: "abc", grace: true } } as unknown as Job<unknown>;
    // pg-boss fails the job whether the handler throws or rejects.
    await expect(Promise.resolve().then(() => handle(message))).rejects.toThrow(/conversationId/);
  });
});
