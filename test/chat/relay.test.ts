// The chat relay streams a turn's events as the worker stores them. In one process (role all,
// the default) it is woken by each stored event rather than waiting for its next poll: here the
// poll is ten minutes apart, so only the wake-up can deliver the pieces within the test.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { relayTurn } from "../../src/chat/relay.ts";
import { endTurn } from "../../src/jobs/kinds/chat-turn/end.ts";
import { lastTurn } from "../../src/store/api-conversations.ts";
import type { Database } from "../../src/store/database.ts";
import { ReplyEnd, Text } from "../../src/store/job-event-kinds.ts";
import { appendJobEvent } from "../../src/store/job-events.ts";
import { insertJob } from "../../src/store/jobs.ts";
import { databases, newJob, seedConversation, seedJob } from "../helpers/db.ts";

const NEVER_MS = 600_000;

describe.each(databases())("chat relay on $name", (target) => {
  let db: Database;
  beforeAll(async () => {
    db = await target.open();
  });
  afterAll(async () => {
    await db?.close();
  });

  it("relays each event this process stores at once, without waiting for a poll", async () => {
    const { conversation } = await seedConversation(db);
    const job = await seedJob(db, conversation);
    const pieces: string[] = [];
    let pieceArrived = () => {};
    const relayed = relayTurn({
      db: db.pool,
      jobId: job.id,
      pollMs: NEVER_MS,
      signal: new AbortController().signal,
      onPiece(text) {
        pieces.push(text);
        pieceArrived();
      },
    });
    const nextPiece = () =>
      new Promise<void>((resolve) => {
        pieceArrived = resolve;
      });
    for (const words of ["first", "second"]) {
      const arrived = nextPiece();
      await appendJobEvent(db.pool, job.id, Text, { text: words });
      await arrived;
    }
    await appendJobEvent(db.pool, job.id, ReplyEnd, {
      usage: { inputTokens: 3, outputTokens: 2, cacheReadInputTokens: 5 },
      costUsd: 0.0042,
    });
    expect(await relayed).toEqual({
      prompt_tokens: 8,
      completion_tokens: 2,
      total_tokens: 10,
      prompt_tokens_details: { cached_tokens: 5 },
      cost: 0.0042,
    });
    expect(pieces.slice(0, 2)).toEqual(["first\n\n", "second\n\n"]);
  });

  it("shows a reply's end only with the turn it leaves, so an at-once next request continues it", async () => {
    const { conversation } = await seedConversation(db);
    const job = await insertJob(db.pool, {
      ...newJob(conversation),
      trigger: "chat",
      context: {
        ...{ agent: "vmpilot", cloneUrl: null, system: "", askedHash: "", transcript: "" },
        pullRequest: false,
      },
    });
    const relayed = relayTurn({
      db: db.pool,
      jobId: job.id,
      pollMs: NEVER_MS,
      signal: new AbortController().signal,
      onPiece() {},
    });
    const turn = { result: undefined, delivered: undefined, commitSha: null, bundle: null };
    const ended = endTurn({ db }, job, "succeeded", undefined, turn);
    await relayed;
    // What the client's next request looks for, read the moment the reply has ended.
    expect((await lastTurn(db.pool, conversation.id))?.jobId).toBe(job.id);
    await ended;
  });
});
