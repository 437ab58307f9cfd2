import { readdir, readFile } from "node:fs/promises";
import type pg from "pg";
import { z } from "zod";
import { type Logger, silentLogger } from "../log/logger.ts";
import { withTransaction } from "./sql.ts";
import { queryRows } from "./stored-value.ts";

const MIGRATIONS_DIR = new URL("./migrations/", import.meta.url);
// Any fixed key works; it only has to differ from other advisory locks taken on the same database.
const MIGRATION_LOCK_KEY = 7_263_011_901;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export async function loadMigrations(dir: URL = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d+_[\w-]+\.sql$/.test(f)).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const [number, ...rest] = file.replace(/\.sql$/, "").split("_");
    migrations.push({
      version: Number(number),
      name: rest.join("_"),
      sql: await readFile(new URL(file, dir), "utf8"),
    });
  }
  const versions = new Set(migrations.map((m) => m.version));
  if (versions.size !== migrations.length) throw new Error("two migrations share a version number");
  return migrations;
}

/**
 * Applies pending migrations in one transaction under an advisory lock, so processes starting
 * together apply each migration once and the others wait, then see it done. Returns the versions
 * this call applied.
 */
export async function migrate(
  pool: pg.Pool,
  options: { logger?: Logger; migrations?: Migration[] } = {},
): Promise<number[]> {
  const logger = options.logger ?? silentLogger;
  const migrations = options.migrations ?? (await loadMigrations());
  return withTransaction(pool, async (client) => {
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_KEY]);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const rows = await queryRows(
      client,
      "SELECT version FROM schema_migrations",
      [],
      z.object({ version: z.number().int() }),
      "schema_migrations",
    );
    const applied = new Set(rows.map((r) => r.version));
    const done: number[] = [];
    for (const migration of migrations) {
      if (applied.has(migration.version)) continue;
      await client.query(migration.sql);
      await client.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [
        migration.version,
        migration.name,
      ]);
      logger.info({ version: migration.version, name: migration.name }, "applied migration");
      done.push(migration.version);
    }
    return done;
  });
}
