// The chat face answers 429 up front when the key's owner has spent their month
// (maxMonthlyCostUsdPerUser), counting their issue jobs in every repository too.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkBudget } from "../../src/chat/budget.ts";
import { defaults } from "../../src/config/repo-config.ts";
import type { Database } from "../../src/store/database.ts";
import { insertJob, updateJob } from "../../src/store/jobs.ts";
import { newJob, openTestDatabase, seedConversation } from "../helpers/db.ts";

let db: Database;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(() => db?.close());

describe("the chat face's budget check", () => {
  it("refuses a key's owner whose month is spent, and no one else", async () => {
    const { conversation } = await seedConversation(db, 9300);
    const job = await insertJob(db.pool, {
      ...newJob(conversation),
      requester: "mona",
      context: { requesterId: 5 },
    });
    await updateJob(db.pool, job.id, { costUsd: 3, status: "succeeded" });
    const capped = { ...defaults, maxMonthlyCostUsdPerUser: 3 };
    const scratch = { id: "vmpilot", repository: null };
    const mona = { kind: "user", id: 5, login: "mona" } as const;
    await expect(checkBudget(db.pool, capped, mona, scratch)).rejects.toMatchObject({
      status: 429,
      code: "insufficient_quota",
      message:
        "You reached the monthly cost limit per person ($3.00, maxMonthlyCostUsdPerUser), which counts your jobs and chat turns this month (UTC) in every repository vmpilot works on, with what running ones may still spend; it resets on the 1st, or a maintainer can raise maxMonthlyCostUsdPerUser.",
    });
    await expect(checkBudget(db.pool, defaults, mona, scratch)).resolves.toBeUndefined();
    const nils = { kind: "user", id: 6, login: "nils" } as const;
    await expect(checkBudget(db.pool, capped, nils, scratch)).resolves.toBeUndefined();
  });
});
