import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { Queryable } from "./sql.ts";

const Row = z.object({ value: z.string().min(32) });

/**
 * The named secret, made on first use and kept in the database, so that it survives restarts and
 * every process behind the database agrees on it. Concurrent first uses keep the first insert.
 */
export async function sharedSecret(db: Queryable, name: string): Promise<string> {
  await db.query(
    "INSERT INTO app_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
    [name, randomBytes(32).toString("hex")],
  );
  const { rows } = await db.query("SELECT value FROM app_secrets WHERE name = $1", [name]);
  return Row.parse(rows[0]).value;
}
