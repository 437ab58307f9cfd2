import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Database } from "../../src/store/database.ts";
import { recordDeliveries, recordDelivery } from "../../src/store/deliveries.ts";
import {
  getRepository,
  setRepositorySettings,
  upsertInstallation,
  upsertRepository,
} from "../../src/store/installations.ts";
import { recordAndLookUp } from "../../src/store/intake-batch.ts";
import { AGENT_EVENTS, PipelineStep, readJobEvent, Text } from "../../src/store/job-event-kinds.ts";
import { appendJobEvent, defineJobEvent, listJobEvents } from "../../src/store/job-events.ts";
import { requestJobCancel, startJobAttempt } from "../../src/store/job-lifecycle.ts";
import {
  getJob,
  insertJob,
  insertJobs,
  listJobs,
  reserveBudget,
  updateJob,
} from "../../src/store/jobs.ts";
import { InvalidStoredValue } from "../../src/store/stored-value.ts";
import { databases, newJob, seedConversation, seedJob } from "../helpers/db.ts";

describe.each(databases())("store records on $name", (target) => {
  let db: Database;
  beforeAll(async () => {
    db = await target.open();
  });
  afterAll(async () => {
    await db.close();
  });

  it("records a delivery id once", async () => {
    const delivery = {
      id: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
      event: "issues",
      action: "labeled",
    };
    const results = await Promise.all([
      recordDelivery(db.pool, delivery),
      recordDelivery(db.pool, delivery),
      recordDelivery(db.pool, delivery),
    ]);
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await recordDelivery(db.pool, delivery)).toBe(false);
  });

  it("records many delivery ids in one statement, each once", async () => {
    await recordDelivery(db.pool, { id: "many-0", event: "issues" });
    const fresh = await recordDeliveries(db.pool, [
      { id: "many-0", event: "issues", action: "opened" },
      { id: "many-1", event: "issue_comment", action: "created", installationId: 7 },
      { id: "many-2", event: "issues", repositoryId: 42 },
      // Repeated within the list: new only once.
      { id: "many-1", event: "issue_comment", action: "created" },
    ]);
    expect(fresh).toEqual(new Set(["many-1", "many-2"]));
    const { rows } = await db.pool.query(
      `SELECT id, event, action, installation_id, repository_id FROM deliveries
       WHERE id LIKE 'many-%' ORDER BY id`,
    );
    expect(rows).toEqual([
      { id: "many-0", event: "issues", action: null, installation_id: null, repository_id: null },
      {
        id: "many-1",
        event: "issue_comment",
        action: "created",
        installation_id: "7",
        repository_id: null,
      },
      { id: "many-2", event: "issues", action: null, installation_id: null, repository_id: "42" },
    ]);
    expect(await recordDeliveries(db.pool, [{ id: "many-2", event: "issues" }])).toEqual(new Set());
  });

  it("inserts many jobs in one statement, each under the id drawn for it", async () => {
    const a = await seedConversation(db);
    const b = await seedConversation(db);
    await recordDeliveries(db.pool, [
      { id: "jobs-a", event: "issue_comment" },
      { id: "jobs-b", event: "issue_comment" },
    ]);
    const inputs = [
      { ...newJob(b.conversation), instruction: "second conversation first", deliveryId: "jobs-b" },
      {
        ...newJob(a.conversation),
        trigger: "command" as const,
        command: "plan",
        instruction: 'quotes " and \\ backslashes, {braces}, ünïcødé',
        triggerCommentId: 2_000_000_003,
        deliveryId: "jobs-a",
        context: { cloneUrl: "https://github.com/acme/repo.git", nested: { list: [1, "two"] } },
      },
      { ...newJob(a.conversation), branch: "vmpilot/7-fix", prNumber: 8 },
    ];
    // The intake draws the ids with its lookup; a job made later by insertJob gets the next one.
    const { rows } = await db.pool.query<{ id: string }>(
      "SELECT nextval(pg_get_serial_sequence('jobs', 'id')) AS id FROM generate_series(1, 3)",
    );
    const ids = rows.map((row) => Number(row.id));
    await insertJobs(db.pool, ids, inputs);
    const jobs = await Promise.all(ids.map((id) => getJob(db.pool, id)));
    // Each id is the row made from the input at the same position, with the defaults insertJob sets.
    for (const [i, input] of inputs.entries()) {
      expect(jobs[i]).toMatchObject({
        conversationId: input.conversationId,
        instruction: input.instruction,
        command: input.command ?? null,
        triggerCommentId: input.triggerCommentId ?? null,
        deliveryId: input.deliveryId ?? null,
        context: input.context ?? {},
        branch: input.branch ?? null,
        prNumber: input.prNumber ?? null,
        status: "queued",
      });
    }
    const single = await insertJob(db.pool, inputs[1] as (typeof inputs)[1]);
    expect(single).toEqual({
      ...jobs[1],
      id: single.id,
      createdAt: single.createdAt,
      updatedAt: single.updatedAt,
    });
    expect(single.id).toBeGreaterThan(Math.max(...ids));
    await insertJobs(db.pool, [], []);
  });

  it("upserts installations and repositories, keeping settings", async () => {
    // A repository whose installation event we never saw still gets recorded.
    await upsertRepository(db.pool, { id: 42, installationId: 5, fullName: "acme/old-name" });
    await setRepositorySettings(db.pool, 42, { label: "bot" });
    await upsertRepository(db.pool, { id: 42, installationId: 5, fullName: "acme/new-name" });
    expect(await getRepository(db.pool, 42)).toMatchObject({
      fullName: "acme/new-name",
      installationId: 5,
      settings: { label: "bot" },
      removedAt: null,
    });
    await upsertRepository(db.pool, {
      id: 42,
      installationId: 5,
      fullName: "acme/new-name",
      removed: true,
    });
    expect((await getRepository(db.pool, 42))?.removedAt).toBeInstanceOf(Date);
    // The intake's lookup reads the row through JSON, its removed_at a string: the same repository.
    const lookup = await recordAndLookUp(db.pool, [], [{ repositoryId: 42, number: 1 }]);
    expect(lookup.repositories.get(42)).toEqual(await getRepository(db.pool, 42));

    await upsertInstallation(db.pool, { id: 5, accountLogin: "acme", accountType: "Organization" });
    await upsertInstallation(db.pool, { id: 5, suspended: true });
    const { rows } = await db.pool.query(
      "SELECT account_login, suspended_at IS NOT NULL AS suspended FROM installations WHERE id = 5",
    );
    expect(rows).toEqual([{ account_login: "acme", suspended: true }]);
    await upsertInstallation(db.pool, { id: 5, suspended: false });
    const { rows: after } = await db.pool.query(
      "SELECT suspended_at FROM installations WHERE id = 5",
    );
    expect(after).toEqual([{ suspended_at: null }]);
  });

  it("inserts, reads, patches and lists jobs", async () => {
    const { conversation } = await seedConversation(db);
    await recordDelivery(db.pool, { id: "delivery-job", event: "issue_comment" });
    const job = await insertJob(db.pool, {
      ...newJob(conversation),
      trigger: "command",
      command: "plan",
      triggerCommentId: 2_000_000_001,
      deliveryId: "delivery-job",
      context: { cloneUrl: "https://github.com/acme/repo.git" },
    });
    expect(job).toMatchObject({
      conversationId: conversation.id,
      status: "queued",
      command: "plan",
      triggerCommentId: 2_000_000_001,
      progressCommentId: null,
      costUsd: 0,
      finishedAt: null,
      context: { cloneUrl: "https://github.com/acme/repo.git" },
    });

    const patched = await updateJob(db.pool, job.id, {
      progressCommentId: 3_000_000_002,
      usage: { inputTokens: 10 },
      costUsd: 0.125,
    });
    expect(patched).toMatchObject({
      status: "queued",
      instruction: "fix it",
      progressCommentId: 3_000_000_002,
      usage: { inputTokens: 10 },
      costUsd: 0.125,
    });
    const acknowledged = await updateJob(db.pool, job.id, { status: "acknowledged" });
    expect(acknowledged?.finishedAt).toBeNull();
    const refused = await updateJob(db.pool, job.id, { status: "refused" });
    expect(refused?.finishedAt).toBeInstanceOf(Date);
    expect(await getJob(db.pool, job.id)).toEqual(refused);
    expect(await getJob(db.pool, 987_654)).toBeUndefined();

    const second = await seedJob(db, conversation);
    expect((await listJobs(db.pool, { conversationId: conversation.id })).map((j) => j.id)).toEqual(
      [second.id, job.id],
    );
    expect(
      (await listJobs(db.pool, { conversationId: conversation.id, unfinished: true })).map(
        (j) => j.id,
      ),
    ).toEqual([second.id]);
    expect(
      (await listJobs(db.pool, { conversationId: conversation.id, statuses: ["refused"] })).map(
        (j) => j.id,
      ),
    ).toEqual([job.id]);
    expect(
      (await listJobs(db.pool, { conversationId: conversation.id, beforeId: second.id })).map(
        (j) => j.id,
      ),
    ).toEqual([job.id]);
  });

  it("reserves daily budget so concurrent jobs never promise more than the day allows", async () => {
    const { conversation } = await seedConversation(db, 4242);
    const [done, a, b] = [
      await seedJob(db, conversation),
      await seedJob(db, conversation),
      await seedJob(db, conversation),
    ];
    await updateJob(db.pool, done.id, { costUsd: 6, status: "succeeded" });
    const limits = { repositoryId: 4242, since: new Date(Date.now() - 60_000), maxDailyUsd: 10 };
    const reserve = (jobId: number) => reserveBudget(db.pool, { ...limits, jobId, maxJobUsd: 5 });
    const grants = await Promise.all([reserve(a.id), reserve(b.id)]);
    expect(grants.map((g) => g.grantUsd).sort()).toEqual([0, 4]);

    // The granted job ends having spent less: what it did not spend is free again.
    const winner = grants[0]?.grantUsd === 4 ? a : b;
    const other = winner === a ? b : a;
    await updateJob(db.pool, winner.id, { costUsd: 1, status: "succeeded" });
    expect(await reserve(other.id)).toEqual({ grantUsd: 3, dailyLeftUsd: 3, jobLeftUsd: 5 });
  });

  // PGlite has one backend, so its transactions never overlap; PostgreSQL's do.
  it.runIf(target.name === "postgres")("reserves under a lock on the repository", async () => {
    const { conversation } = await seedConversation(db, 4243);
    const job = await seedJob(db, conversation);
    const holder = await db.pool.connect();
    await holder.query("BEGIN");
    await holder.query("SELECT 1 FROM repositories WHERE id = 4243 FOR UPDATE");
    const since = new Date(Date.now() - 60_000);
    const pending = reserveBudget(db.pool, {
      jobId: job.id,
      repositoryId: 4243,
      since,
      maxDailyUsd: 10,
      maxJobUsd: 5,
    });
    const waiting = async () => {
      const { rows } = await holder.query(
        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
      );
      return rows.length === 1;
    };
    const deadline = Date.now() + 5000;
    while (!(await waiting()) && Date.now() < deadline);
    expect(await waiting()).toBe(true);
    await holder.query("COMMIT");
    holder.release();
    expect((await pending).grantUsd).toBe(5);
  });

  it("cancels a queued job outright and a running one by request", async () => {
    const { conversation } = await seedConversation(db);
    const queued = await seedJob(db, conversation);
    expect(await requestJobCancel(db.pool, queued.id)).toBe("cancelled");
    expect(await getJob(db.pool, queued.id)).toMatchObject({ status: "cancelled" });
    expect(await startJobAttempt(db.pool, queued.id, 1)).toBe(false);

    const running = await seedJob(db, conversation);
    expect(await startJobAttempt(db.pool, running.id, 1)).toBe(true);
    expect(await requestJobCancel(db.pool, running.id)).toBe("requested");
    expect(await getJob(db.pool, running.id)).toMatchObject({ status: "running" });
    await updateJob(db.pool, running.id, { status: "cancelled" });
    expect(await requestJobCancel(db.pool, running.id)).toBe("finished");
  });

  it("lists a job's events in order, resuming after an id", async () => {
    const { conversation } = await seedConversation(db);
    const job = await seedJob(db, conversation);
    const step = defineJobEvent("step", z.object({ name: z.string() }));
    const tool = defineJobEvent("tool", z.object({ line: z.string() }));
    const first = await appendJobEvent(db.pool, job.id, step, { name: "clone" });
    const second = await appendJobEvent(db.pool, job.id, tool, { line: "npm test" });
    const events = await listJobEvents(db.pool, job.id);
    expect(events.map((e) => [e.type, e.data])).toEqual([
      ["step", { name: "clone" }],
      ["tool", { line: "npm test" }],
    ]);
    expect(events[0]?.at).toBeInstanceOf(Date);
    expect(await listJobEvents(db.pool, job.id, first.id)).toEqual([second]);
  });

  it("stores an event as its definition parses it, and stores nothing its definition refuses", async () => {
    const { conversation } = await seedConversation(db);
    const job = await seedJob(db, conversation);
    const counted = defineJobEvent(
      "counted",
      z.object({ n: z.number(), note: z.string().default("") }),
    );
    const extra = { n: 1, kept: "no" };
    await appendJobEvent(db.pool, job.id, counted, extra);
    // Data read from elsewhere, which the types cannot check, is stopped before the insert.
    await expect(
      appendJobEvent(db.pool, job.id, counted, JSON.parse('{ "n": "one" }')),
    ).rejects.toThrow(/expected number/);
    const events = await listJobEvents(db.pool, job.id);
    expect(events.map((e) => e.data)).toEqual([{ n: 1, note: "" }]);
  });

  it("reads an event back as the kind its definition wrote, and any other type as other", async () => {
    const { conversation } = await seedConversation(db);
    const job = await seedJob(db, conversation);
    const usage = { inputTokens: 5, outputTokens: 2, costUsd: 0.1 };
    await appendJobEvent(db.pool, job.id, AGENT_EVENTS.usage, {
      step: 1,
      request: usage,
      totals: usage,
      priceKnown: false,
    });
    await appendJobEvent(db.pool, job.id, AGENT_EVENTS.compacted, {
      step: 2,
      clearedToolResults: 3,
      summarizedMessages: 0,
      tokensBefore: 900,
      tokensAfter: 300,
      // What the loop hands its listener besides: the conversation is not logged.
      ...{ messages: [{ role: "user", content: "the whole conversation" }] },
    });
    await appendJobEvent(db.pool, job.id, PipelineStep, { step: "agent", message: "ready" });
    // @ts-expect-error a text event's data has its text
    await expect(appendJobEvent(db.pool, job.id, Text, { txt: "hi" })).rejects.toThrow();
    const kinds = (await listJobEvents(db.pool, job.id)).map(readJobEvent);
    expect(kinds).toEqual([
      {
        type: "usage",
        data: {
          step: 1,
          request: { ...usage, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 },
          totals: { ...usage, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 },
          priceKnown: false,
        },
      },
      {
        type: "compacted",
        data: {
          step: 2,
          clearedToolResults: 3,
          summarizedMessages: 0,
          tokensBefore: 900,
          tokensAfter: 300,
        },
      },
      { type: "other", name: "pipeline", message: "ready", details: { step: "agent" } },
    ]);
  });

  it("refuses a row of another shape by name, rather than handing it on cast", async () => {
    const { conversation } = await seedConversation(db);
    const job = await seedJob(db, conversation);
    await db.pool.query("INSERT INTO job_events (job_id, type, data) VALUES ($1, 'step', '[1]')", [
      job.id,
    ]);
    const error = await listJobEvents(db.pool, job.id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidStoredValue);
    expect(String(error)).toContain(`job_events of job ${job.id} (row 0)`);
    await db.pool.query("UPDATE repositories SET settings = '\"x\"' WHERE id = $1", [
      conversation.repositoryId,
    ]);
    await expect(getRepository(db.pool, conversation.repositoryId)).rejects.toBeInstanceOf(
      InvalidStoredValue,
    );
  });
});
