// A repository's scheduled automation fires once at its slot, however many workers share the
// database: two queues on one database (two processes) under one pg-boss TestClock, which moves
// pg-boss's timers and the database's job_now() by hand. The test waits on database state, never
// on the wall clock.
import { TestClock } from "pg-boss";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { handleAutomationMessage } from "../../src/jobs/automations/schedules.ts";
import { createQueue, type Queue } from "../../src/jobs/queue/queue.ts";
import { createLogger } from "../../src/log/logger.ts";
import type { Database } from "../../src/store/database.ts";
import { upsertRepository } from "../../src/store/installations.ts";
import { connectAgain, databases } from "../helpers/db.ts";
import { github, mockRepoConfig, useGitHubMock } from "../helpers/github-mock.ts";
import { testOctokit } from "../helpers/octokit.ts";

useGitHubMock();

const logger = createLogger({ level: "silent", format: "json" });
const DAY = 86_400_000;
const FILE = `
automations:
  - name: weekly-deps
    schedule: "0 6 * * 1"
    prompt: Update the lockfile and fix what breaks.
`;

/**
 * The first Monday 06:00 UTC at least a minute ahead of `now`: pg-boss's time runs there, ahead
 * of the wall clock that the rows this app writes itself are stamped with.
 */
function nextMondaySix(now: number): number {
  const day = new Date(now);
  day.setUTCHours(6, 0, 0, 0);
  let slot = day.getTime() + ((8 - day.getUTCDay()) % 7) * DAY;
  if (slot - 60_000 <= now) slot += 7 * DAY;
  return slot;
}

describe.each(databases())("scheduled automations on $name", (target) => {
  let db: Database;
  let other: Database;

  beforeAll(async () => {
    db = await target.open();
    other = await connectAgain(db);
  });
  afterAll(async () => {
    await other?.close();
    await db?.close();
  });

  const automationJobs = async () =>
    (
      await db.pool.query(
        "SELECT trigger, number, command, requester, instruction, context, delivery_id FROM jobs WHERE trigger = 'automation'",
      )
    ).rows;
  const fires = async () =>
    (
      await db.pool.query<{ state: string }>(
        "SELECT state FROM pgboss.job WHERE name = 'vmpilot-automations'",
      )
    ).rows.map((row) => row.state);

  it("fires a schedule once at its slot with two workers, as a job of the app's own", async () => {
    await upsertRepository(db.pool, { id: 9101, installationId: 77, fullName: "acme/weekly" });
    const slot = nextMondaySix(Date.now());
    const clock = new TestClock(slot - 30_000);
    const queues: Queue[] = [db, other].map((on) =>
      createQueue(on, { clock, pollingIntervalSeconds: 10, logger }),
    );
    try {
      for (const queue of queues) await queue.start();
      for (const queue of queues) {
        const deps = {
          db,
          queue,
          auth: async () => testOctokit(),
          appSlug: async () => "vmpilot-bot",
          logger,
        };
        await queue.work(async () => {}, {
          onAutomation: (message, id, signal) => handleAutomationMessage(deps, message, id, signal),
        });
      }
      await queues[0]?.setSchedules(9101, [{ name: "weekly-deps", cron: "0 6 * * 1" }]);
      // What the one fire asks GitHub: the file, still naming the automation, and the repository.
      mockRepoConfig("acme/weekly", FILE);
      github().get("/repos/acme/weekly").reply(200, {
        clone_url: "https://github.com/acme/weekly.git",
        default_branch: "main",
      });

      // Both processes' cron passes come round in the slot's minute; pg-boss files the slot once.
      await clock.tick(90_000);
      await vi.waitFor(async () => expect(await automationJobs()).toHaveLength(1), {
        timeout: 20_000,
        interval: 50,
      });
      // The next passes, in the slot's window and after it, send nothing more.
      await clock.tick(120_000);
      await vi.waitFor(async () => expect(await fires()).toEqual(["completed"]), {
        timeout: 20_000,
        interval: 50,
      });
      const [job] = await automationJobs();
      expect(await automationJobs()).toHaveLength(1);
      expect(job).toMatchObject({
        trigger: "automation",
        number: null,
        command: "fix",
        requester: "vmpilot-bot[bot]",
        instruction: "Update the lockfile and fix what breaks.",
        context: {
          owner: "acme",
          name: "weekly",
          cloneUrl: "https://github.com/acme/weekly.git",
          defaultBranch: "main",
          automation: { name: "weekly-deps" },
        },
        delivery_id: expect.stringMatching(/^schedule:/),
      });
    } finally {
      for (const queue of queues) await queue.stop();
    }
  });

  it("keeps a repository's schedules to what its file says", async () => {
    const queue = createQueue(db, { logger });
    try {
      await queue.start();
      await queue.setSchedules(9102, [
        { name: "a", cron: "0 6 * * 1" },
        { name: "b", cron: "0 7 * * *" },
      ]);
      await queue.setSchedules(9102, [
        { name: "b", cron: "30 7 * * *" },
        { name: "c", cron: "0 0 1 * *" },
      ]);
      await queue.setSchedules(9103, [{ name: "a", cron: "0 6 * * 1" }]);
      const schedules = async () =>
        (
          await db.pool.query(
            "SELECT key, cron, timezone FROM pgboss.schedule WHERE name = 'vmpilot-automations' AND key ~ '^910[23]/' ORDER BY key",
          )
        ).rows;
      expect(await schedules()).toEqual([
        { key: "9102/b", cron: "30 7 * * *", timezone: "UTC" },
        { key: "9102/c", cron: "0 0 1 * *", timezone: "UTC" },
        { key: "9103/a", cron: "0 6 * * 1", timezone: "UTC" },
      ]);
      expect(await queue.scheduledRepositories()).toEqual(expect.arrayContaining([9102, 9103]));
      await queue.setSchedules(9102, []);
      expect((await schedules()).map((s) => s.key)).toEqual(["9103/a"]);
    } finally {
      await queue.stop();
    }
  });
});
