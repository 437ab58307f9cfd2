// The sweeper against the store and the Fly API fake: a VM outlives neither its attempt nor its job.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sweepOnce } from "../../src/roles/vm-sweeper.ts";
import type { Database } from "../../src/store/database.ts";
import { finishJob, startJobAttempt } from "../../src/store/job-lifecycle.ts";
import { databases, seedConversation, seedJob } from "../helpers/db.ts";
import { type FlyFake, flyEngine, startFlyFake } from "../helpers/fly-fake.ts";

describe.each(databases())("the VM sweeper on $name", (target) => {
  let db: Database;
  let fake: FlyFake;
  beforeAll(async () => {
    db = await target.open();
    fake = await startFlyFake();
  });
  afterAll(async () => {
    await fake.close();
    await db.close();
  });

  it("destroys the VMs of dead attempts, ended and unknown jobs; keeps the running attempt's", async () => {
    const engine = flyEngine(fake);
    const { conversation } = await seedConversation(db);
    const retried = await seedJob(db, conversation);
    const ended = await seedJob(db, conversation);
    // A worker died during attempt 1 of `retried`; attempt 2 runs now. `ended` is over.
    await startJobAttempt(db.pool, retried.id, 1);
    await startJobAttempt(db.pool, retried.id, 2);
    await startJobAttempt(db.pool, ended.id, 1);
    await finishJob(db.pool, ended.id);
    const owners = [
      `job-${retried.id}-1`,
      `job-${retried.id}-2`,
      `job-${ended.id}-1`,
      "job-999999-1",
      "cli-77",
    ];
    for (const owner of owners) await engine.create({ owner, secret: "s".repeat(40) });
    expect(await sweepOnce(engine, db.pool)).toBe(3);
    const left = (await engine.list()).map((vm) => vm.owner).sort();
    expect(left).toEqual(["cli-77", `job-${retried.id}-2`].sort());
    for (const vm of await engine.list()) await engine.destroy(vm.id);
    expect(fake.vms.running()).toBe(0);
  });
});
