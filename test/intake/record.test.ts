// Intake's durable write on its own, against PGlite and PostgreSQL: group commit, dedupe inside
// and across batches, per-repository settings, one bad delivery failing alone, and the local
// worker woken once the batch has committed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromIssueComment, fromIssues } from "../../src/intake/deliveries.ts";
import { createIntake, type IntakeResult } from "../../src/intake/record.ts";
import { createQueue, type Queue } from "../../src/jobs/queue/queue.ts";
import type { Database } from "../../src/store/database.ts";
import {
  forgetFileSettings,
  setRepositoryFileSettings,
  setRepositorySettings,
  upsertRepository,
} from "../../src/store/installations.ts";
import { getJob, listJobs } from "../../src/store/jobs.ts";
import { databases } from "../helpers/db.ts";
import { examplePayload } from "../helpers/webhooks.ts";

let nextRepository = 7000;
// Each delivery reports its own event: a repeated comment or label id is a replay.
let nextEventId = 1;

function comment(repositoryId: number, body: string, number = 1) {
  const payload = examplePayload("issue_comment", "created");
  payload.installation = { id: 3 };
  payload.repository.id = repositoryId;
  payload.repository.full_name = `acme/r${repositoryId}`;
  payload.issue.number = number;
  payload.comment.body = body;
  payload.comment.id = nextEventId++;
  return fromIssueComment(payload);
}

function labeled(repositoryId: number, label: string) {
  const payload = examplePayload("issues", "labeled");
  payload.installation = { id: 3 };
  payload.repository.id = repositoryId;
  payload.repository.full_name = `acme/r${repositoryId}`;
  payload.label.name = label;
  payload.label.id = nextEventId++;
  return fromIssues(payload);
}

describe.each(databases())("intake on $name", (target) => {
  let db: Database;
  let queue: Queue;
  let record: ReturnType<typeof createIntake>;

  beforeAll(async () => {
    db = await target.open();
    queue = createQueue(db, { pollingIntervalSeconds: 60 });
    await queue.start();
    record = createIntake({
      db,
      queue,
      appSlug: "vmpilot-bot",
      label: "vmpilot",
      command: "vmpilot",
    });
  });
  afterAll(async () => {
    await queue?.stop();
    await db?.close();
  });

  it("writes concurrent deliveries in shared transactions, one job per delivery id", async () => {
    const repo = nextRepository++;
    const ids = Array.from({ length: 40 }, (_, i) => `batch-${repo}-${i}`);
    // Every fifth id is sent twice at once: the copies land in the same batch or the next one.
    const sends = [...ids, ...ids.filter((_, i) => i % 5 === 0)].map((id, i) =>
      record(id, comment(repo, `/vmpilot fix item ${i % 40}`, 1 + (i % 3))),
    );
    const results: IntakeResult[] = await Promise.all(sends);
    expect(results.filter((r) => "jobId" in r)).toHaveLength(40);
    expect(results.filter((r) => "duplicate" in r)).toHaveLength(8);
    const jobs = await listJobs(db.pool, { repositoryId: repo, limit: 100 });
    expect(jobs).toHaveLength(40);
    expect(new Set(jobs.map((j) => j.deliveryId))).toEqual(new Set(ids));
    expect(new Set(jobs.map((j) => j.conversationId)).size).toBe(3);
  });

  it("ignores a repository that turned vmpilot off, and honours its own label", async () => {
    const off = nextRepository++;
    const custom = nextRepository++;
    for (const id of [off, custom]) {
      await upsertRepository(db.pool, { id, installationId: 3, fullName: `acme/r${id}` });
      await setRepositoryFileSettings(db.pool, id, {});
    }
    await setRepositorySettings(db.pool, off, { enabled: false });
    await setRepositorySettings(db.pool, custom, { label: "ai-please" });
    expect(await record(`off-${off}`, comment(off, "/vmpilot fix"))).toEqual({
      ignored: "disabled for this repository",
    });
    expect(await record(`lbl-${custom}-a`, labeled(custom, "vmpilot"))).toEqual({
      ignored: "no trigger",
    });
    expect(await record(`lbl-${custom}-b`, labeled(custom, "AI-please"))).toMatchObject({
      jobId: expect.any(Number),
      trigger: { kind: "label", verb: "fix" },
    });
  });

  it("takes the label from vmpilot.yml, and lets the worker judge while the file is unknown", async () => {
    const repo = nextRepository++;
    await upsertRepository(db.pool, { id: repo, installationId: 3, fullName: `acme/r${repo}` });
    await setRepositorySettings(db.pool, repo, { label: "from-page" });
    await setRepositoryFileSettings(db.pool, repo, { label: "from-file" });
    expect(await record(`file-${repo}-a`, labeled(repo, "from-page"))).toEqual({
      ignored: "no trigger",
    });
    const wanted = await record(`file-${repo}-b`, labeled(repo, "from-file"));
    expect(wanted).toMatchObject({ trigger: { kind: "label" } });

    await forgetFileSettings(db.pool, { repositoryId: repo });
    const candidate = await record(`file-${repo}-c`, labeled(repo, "bug"));
    expect(candidate).toMatchObject({ trigger: { kind: "label" } });
    const job = await getJob(db.pool, (candidate as { jobId: number }).jobId);
    expect(job?.context).toMatchObject({ label: "bug" });
  });

  it("takes a replayed label event once, and the same label added again later anew", async () => {
    const repo = nextRepository++;
    const event = (repositoryId: number, updatedAt: string) => {
      const payload = examplePayload("issues", "labeled");
      payload.installation = { id: 3 };
      payload.repository.id = repositoryId;
      payload.label = { ...payload.label, id: 99, name: "vmpilot" };
      payload.issue.updated_at = updatedAt;
      return fromIssues(payload);
    };
    const first = "2026-01-01T00:00:00Z";
    const replays = await Promise.all(
      ["a", "b", "c"].map((n) => record(`replay-${repo}-${n}`, event(repo, first))),
    );
    expect(replays.filter((r) => "jobId" in r)).toHaveLength(1);
    expect(replays.filter((r) => "duplicate" in r)).toHaveLength(2);
    const later = await record(`replay-${repo}-later`, event(repo, "2026-01-02T00:00:00Z"));
    expect(later).toMatchObject({ jobId: expect.any(Number) });
    // The key is per repository: another repository's event with the same ids is its own.
    const elsewhere = await record(`replay-${repo}-elsewhere`, event(nextRepository++, first));
    expect(elsewhere).toMatchObject({ jobId: expect.any(Number) });
  });

  it("fails only the bad delivery of a batch", async () => {
    const repo = nextRepository++;
    const first = record(`ok-${repo}-0`, comment(repo, "/vmpilot fix"));
    // An issue number outside PostgreSQL's integer range makes that row's insert fail.
    const batch = [
      record(`ok-${repo}-1`, comment(repo, "/vmpilot fix")),
      record(`bad-${repo}`, comment(repo, "/vmpilot fix", 2 ** 40)),
      record(`ok-${repo}-2`, comment(repo, "/vmpilot fix")),
    ];
    // Settle the batch before waiting on `first`: its bad delivery may fail while `first` runs.
    const settling = Promise.allSettled(batch);
    await first;
    const settled = await settling;
    expect(settled.map((s) => s.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    expect(await listJobs(db.pool, { repositoryId: repo })).toHaveLength(3);
  });
  it("keeps nothing of a batch whose queue entries fail, so the redelivery is new", async () => {
    const repo = nextRepository++;
    const failing = createIntake({
      db,
      queue: {
        // Fails on the server, after the jobs' insert and with COMMIT right behind it.
        async enqueueJobs(client, _jobs, sent) {
          const failed = client.query("SELECT 1 / 0");
          sent?.();
          await failed;
        },
        wake() {},
      },
      appSlug: "vmpilot-bot",
      label: "vmpilot",
      command: "vmpilot",
    });
    const delivery = comment(repo, "/vmpilot fix");
    await expect(failing(`lost-${repo}`, delivery)).rejects.toThrow("division by zero");
    expect(await listJobs(db.pool, { repositoryId: repo })).toEqual([]);
    expect(await record(`lost-${repo}`, delivery)).toMatchObject({ jobId: expect.any(Number) });
    expect(await listJobs(db.pool, { repositoryId: repo })).toHaveLength(1);
  });
});

describe.each(databases())("intake wakes the local worker on $name", (target) => {
  let db: Database;
  let queue: Queue;

  beforeAll(async () => {
    db = await target.open();
    // Polling too slow for the test's time limit: the job runs in time only if wake() works.
    queue = createQueue(db, { pollingIntervalSeconds: 60 });
    await queue.start();
  });
  afterAll(async () => {
    await queue?.stop();
    await db?.close();
  });

  it("after the batch commits, so the worker finds the job at once", async () => {
    let ranJob!: (jobId: number) => void;
    const ran = new Promise<number>((resolve) => {
      ranJob = resolve;
    });
    await queue.work(async ({ jobId }) => ranJob(jobId));
    const seenAtWake: Array<Promise<unknown>> = [];
    const record = createIntake({
      db,
      queue: {
        enqueueJobs: queue.enqueueJobs,
        wake() {
          // Read from another connection: only a committed job is there to see.
          seenAtWake.push(db.pool.query("SELECT id FROM jobs").then(({ rows }) => rows.length));
          queue.wake();
        },
      },
      appSlug: "vmpilot-bot",
      label: "vmpilot",
      command: "vmpilot",
    });
    const repo = nextRepository++;
    const result = await record(`wake-${repo}`, comment(repo, "/vmpilot fix"));
    expect(result).toMatchObject({ jobId: expect.any(Number) });
    const jobId = (result as { jobId: number }).jobId;
    expect(await ran).toBe(jobId);
    expect(await Promise.all(seenAtWake)).toEqual([1]);
    expect(await getJob(db.pool, jobId)).toMatchObject({ deliveryId: `wake-${repo}` });
  }, 10_000);
});
