import { afterAll, describe, expect, it } from "vitest";
import type { Database } from "../../src/store/database.ts";
import { prepared } from "../../src/store/sql.ts";
import { connectAgain, databases } from "../helpers/db.ts";

describe.each(databases())("prepared statements on $name", (target) => {
  const open: Database[] = [];
  afterAll(async () => {
    for (const db of open.reverse()) await db.close();
  });

  it("are prepared once per connection, also where connections share one backend", async () => {
    const db = await target.open();
    open.push(db);
    const other = await connectAgain(db);
    open.push(other);
    const text = "SELECT $1::int + 1 AS n";
    const first = await db.pool.connect();
    const clients = [first, await db.pool.connect(), await other.pool.connect()];
    try {
      // Each connection prepares the same text under its own name, and reuses it.
      for (const round of [1, 2]) {
        const answers = await Promise.all(
          clients.map(async (client) => (await client.query(prepared(client, text, [round]))).rows),
        );
        expect(answers).toEqual(clients.map(() => [{ n: round + 1 }]));
      }
      const names = clients.map((client) => prepared(client, text, []).name);
      expect(new Set(names).size).toBe(3);
      const { rows } = await first.query(
        "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name LIKE 'vmpilot-%'",
      );
      // On PGlite's one backend all three are there; on PostgreSQL only this connection's.
      expect(rows[0].n).toBe(target.name === "pglite" ? 3 : 1);
      // A pool chooses a connection per call: no name.
      expect(prepared(db.pool, text, [1]).name).toBeUndefined();
    } finally {
      for (const client of clients) client.release();
    }
  });
});
