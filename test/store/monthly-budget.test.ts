// The monthly per-person budget (maxMonthlyCostUsdPerUser): a job reserves against its repository's
// day and its requester's month at once; the month counts what the person spent everywhere, their
// issue jobs by GitHub user id and the chat turns of their keys alike.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApiConversation } from "../../src/store/api-conversations.ts";
import type { Database } from "../../src/store/database.ts";
import {
  insertJob,
  type Job,
  reserveBudget,
  SPENDER_BUDGET_LOCK,
  updateJob,
} from "../../src/store/jobs.ts";
import { spentBySpender } from "../../src/store/spenders.ts";
import { databases, newJob, seedConversation } from "../helpers/db.ts";

describe.each(databases())("the monthly budget per person ($name)", (target) => {
  let db: Database;
  let nextRepository = 9100;
  let nextPerson = 700;

  beforeAll(async () => {
    db = await target.open();
  });
  afterAll(async () => {
    await db?.close();
  });

  /** An issue job of the person (by id), each in a repository of its own. */
  async function issueJob(person: { id?: number; login: string }, costUsd = 0): Promise<Job> {
    const { conversation } = await seedConversation(db, nextRepository++);
    const job = await insertJob(db.pool, {
      ...newJob(conversation),
      requester: person.login,
      context: person.id === undefined ? {} : { requesterId: person.id },
    });
    if (costUsd === 0) return job;
    return (await updateJob(db.pool, job.id, { costUsd, status: "succeeded" })) as Job;
  }

  /** A turn of a conversation the person's key started, on a repository. */
  async function chatTurn(person: { id: number; login: string }, costUsd: number) {
    const { conversation: issue } = await seedConversation(db, nextRepository++);
    const conversation = await createApiConversation(db.pool, {
      owner: { kind: "user", ...person },
      repositoryId: issue.repositoryId,
    });
    const job = await insertJob(db.pool, {
      conversationId: conversation.id,
      installationId: 77,
      repositoryId: issue.repositoryId,
      repo: `acme/repo-${issue.repositoryId}`,
      number: null,
      trigger: "chat",
      requester: person.login,
    });
    await updateJob(db.pool, job.id, { costUsd, status: "succeeded" });
  }

  const newPerson = (login: string) => ({ id: nextPerson++, login });
  const monthStart = () => new Date(Date.now() - 60_000);
  const reserve = (job: Job, maxUsd: number) =>
    reserveBudget(db.pool, {
      jobId: job.id,
      repositoryId: job.repositoryId as number,
      since: new Date(Date.now() - 60_000),
      maxDailyUsd: 100,
      maxJobUsd: 5,
      monthly: { since: monthStart(), maxUsd: maxUsd },
    });

  it("counts the person's issue jobs and chat turns in every repository, and refuses once the month is spent", async () => {
    const mona = newPerson("mona");
    await issueJob(mona, 3);
    // Renamed since: the id is the same person.
    await issueJob({ ...mona, login: "mona-renamed" }, 2);
    await chatTurn(mona, 1);
    // Before the month began; someone else; a job that knows only a login like hers.
    const old = await issueJob(mona, 50);
    await db.pool.query("UPDATE jobs SET created_at = now() - interval '2 days' WHERE id = $1", [
      old.id,
    ]);
    await issueJob(newPerson("hubot"), 40);
    await issueJob({ login: "mona" }, 30);
    expect(await spentBySpender(db.pool, String(mona.id), monthStart())).toBe(6);

    const job = await issueJob(mona);
    expect(await reserve(job, 10)).toEqual({
      grantUsd: 4,
      dailyLeftUsd: 100,
      jobLeftUsd: 5,
      monthlyLeftUsd: 4,
    });
    await updateJob(db.pool, job.id, { costUsd: 4, status: "succeeded" });
    const next = await issueJob(mona);
    expect(await reserve(next, 10)).toMatchObject({ grantUsd: 0, monthlyLeftUsd: 0 });
    // An app's job (an automation's) is no person's: it reserves against the day alone.
    const automation = await issueJob({ login: "vmpilot-bot[bot]" });
    expect(await reserve(automation, 0.01)).toEqual({
      grantUsd: 5,
      dailyLeftUsd: 100,
      jobLeftUsd: 5,
    });
    // Without a cap, the month is not looked at.
    expect(
      await reserveBudget(db.pool, {
        jobId: next.id,
        repositoryId: next.repositoryId as number,
        since: monthStart(),
        maxDailyUsd: 100,
        maxJobUsd: 5,
      }),
    ).toEqual({ grantUsd: 5, dailyLeftUsd: 100, jobLeftUsd: 5 });
  });

  it("counts an app's job against the person it records (an automation on anyone's issue)", async () => {
    const pia = newPerson("pia");
    await issueJob(pia, 8);
    // The app requested it; the issue's author, by id, spends it.
    const triage = await issueJob({ id: pia.id, login: "vmpilot-bot[bot]" });
    expect(await reserve(triage, 10)).toEqual({
      grantUsd: 2,
      dailyLeftUsd: 100,
      jobLeftUsd: 5,
      monthlyLeftUsd: 2,
    });
    await updateJob(db.pool, triage.id, { costUsd: 2, status: "succeeded" });
    expect(await spentBySpender(db.pool, String(pia.id), monthStart())).toBe(10);
    expect(await reserve(await issueJob(pia), 10)).toMatchObject({
      grantUsd: 0,
      monthlyLeftUsd: 0,
    });
  });

  it("lets only one of two jobs at once have what is left, each in a repository of its own", async () => {
    const nils = newPerson("nils");
    await issueJob(nils, 6);
    const [a, b] = [await issueJob(nils), await issueJob(nils)] as [Job, Job];
    const grants = await Promise.all([reserve(a, 10), reserve(b, 10)]);
    expect(grants.map((g) => g.grantUsd).sort()).toEqual([0, 4]);
    expect(grants.map((g) => g.monthlyLeftUsd).sort()).toEqual([0, 4]);
  });

  // PGlite has one backend, so its transactions never overlap; PostgreSQL's do.
  it.runIf(target.name === "postgres")("reserves under a lock on the person", async () => {
    const olga = newPerson("olga");
    const job = await issueJob(olga);
    const holder = await db.pool.connect();
    await holder.query("BEGIN");
    await holder.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [
      SPENDER_BUDGET_LOCK,
      String(olga.id),
    ]);
    const pending = reserve(job, 10);
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
    expect(await pending).toMatchObject({ grantUsd: 5, monthlyLeftUsd: 10 });
  });
});
