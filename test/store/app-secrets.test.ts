import { afterAll, describe, expect, it } from "vitest";
import { sharedSecret } from "../../src/store/app-secrets.ts";
import type { Database } from "../../src/store/database.ts";
import { connectAgain, databases } from "../helpers/db.ts";

describe.each(databases())("shared secrets on $name", (target) => {
  const open: Database[] = [];
  afterAll(async () => {
    for (const db of open.reverse()) await db.close();
  });

  it("makes a secret once, and every process behind the database gets the same one", async () => {
    const db = await target.open();
    open.push(db);
    const again = await connectAgain(db);
    open.push(again);
    const [a, b] = await Promise.all([
      sharedSecret(db.pool, "web-session"),
      sharedSecret(again.pool, "web-session"),
    ]);
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(b).toBe(a);
    expect(await sharedSecret(db.pool, "web-session")).toBe(a);
    expect(await sharedSecret(db.pool, "other")).not.toBe(a);
  });
});
