import type pg from "pg";
import { z } from "zod";
import { type Queryable, withTransaction } from "./sql.ts";
import { bigint, queryRows, row, timestamp } from "./stored-value.ts";

export interface InstallationInput {
  id: number;
  accountLogin?: string | null;
  accountType?: string | null;
  /** true marks it suspended, false clears that, undefined leaves it as stored. */
  suspended?: boolean;
  deleted?: boolean;
}

export interface RepositoryInput {
  id: number;
  installationId: number;
  fullName: string;
  removed?: boolean;
}

// true sets the timestamp once, false clears it, null (undefined) keeps what is stored.
const FLAG = (column: string, param: string) =>
  `CASE WHEN ${param}::boolean IS NULL THEN ${column}
        WHEN ${param}::boolean THEN coalesce(${column}, now()) END`;

export async function upsertInstallation(db: Queryable, input: InstallationInput): Promise<void> {
  await db.query(
    `INSERT INTO installations AS i (id, account_login, account_type, suspended_at, deleted_at)
     VALUES ($1, $2, $3, CASE WHEN $4::boolean THEN now() END, CASE WHEN $5::boolean THEN now() END)
     ON CONFLICT (id) DO UPDATE SET
       account_login = coalesce(EXCLUDED.account_login, i.account_login),
       account_type = coalesce(EXCLUDED.account_type, i.account_type),
       suspended_at = ${FLAG("i.suspended_at", "$4")},
       deleted_at = ${FLAG("i.deleted_at", "$5")},
       updated_at = now()`,
    [
      input.id,
      input.accountLogin ?? null,
      input.accountType ?? null,
      input.suspended ?? null,
      input.deleted ?? null,
    ],
  );
}

/** Records the repository, and its installation if we never heard of it (installed before us). */
export async function upsertRepository(db: Queryable, input: RepositoryInput): Promise<void> {
  await db.query(
    `WITH inst AS (INSERT INTO installations (id) VALUES ($2) ON CONFLICT (id) DO NOTHING)
     INSERT INTO repositories AS r (id, installation_id, full_name, removed_at)
     VALUES ($1, $2, $3, CASE WHEN $4::boolean THEN now() END)
     ON CONFLICT (id) DO UPDATE SET
       installation_id = EXCLUDED.installation_id,
       full_name = EXCLUDED.full_name,
       removed_at = ${FLAG("r.removed_at", "$4")},
       updated_at = now()`,
    [input.id, input.installationId, input.fullName, input.removed ?? null],
  );
}

/** A repositories row, read by itself or inside JSON (intake-batch.ts's json_agg). */
export const RepositoryRow = row({
  id: bigint,
  installation_id: bigint,
  full_name: z.string(),
  /** The settings page's values. */
  settings: z.record(z.string(), z.unknown()),
  /**
   * The trigger settings of `.github/vmpilot.yml` as last read (automations among them); null
   * when unknown or changed.
   */
  file_settings: z.record(z.string(), z.unknown()).nullable(),
  removed_at: timestamp.nullable(),
});
export type Repository = z.output<typeof RepositoryRow>;

export async function getRepository(db: Queryable, id: number): Promise<Repository | undefined> {
  const [repository] = await queryRows(
    db,
    "SELECT * FROM repositories WHERE id = $1",
    [id],
    RepositoryRow,
    `repositories row ${id}`,
  );
  return repository;
}

export async function setRepositorySettings(
  db: Queryable,
  id: number,
  settings: Record<string, unknown>,
): Promise<void> {
  await db.query("UPDATE repositories SET settings = $2, updated_at = now() WHERE id = $1", [
    id,
    JSON.stringify(settings),
  ]);
}

export async function setRepositoryFileSettings(
  db: Queryable,
  id: number,
  fileSettings: Record<string, unknown>,
): Promise<void> {
  await db.query(
    "UPDATE repositories SET file_settings = $2 WHERE id = $1 AND file_settings IS DISTINCT FROM $2",
    [id, JSON.stringify(fileSettings)],
  );
}

/**
 * Marks the file settings unknown after a push changed `.github/vmpilot.yml`: of one repository,
 * or of every repository of the installation when the owner's shared `.github` repository changed.
 */
export async function forgetFileSettings(
  db: Queryable,
  scope: { repositoryId: number } | { installationId: number },
): Promise<void> {
  if ("repositoryId" in scope) {
    await db.query("UPDATE repositories SET file_settings = NULL WHERE id = $1", [
      scope.repositoryId,
    ]);
  } else {
    await db.query("UPDATE repositories SET file_settings = NULL WHERE installation_id = $1", [
      scope.installationId,
    ]);
  }
}

const ACTIVE = `SELECT r.* FROM repositories r JOIN installations i ON i.id = r.installation_id
  WHERE r.removed_at IS NULL AND i.suspended_at IS NULL AND i.deleted_at IS NULL`;

/** Repositories the app can act on now: not removed, on a live installation; by name. */
export async function listActiveRepositories(db: Queryable): Promise<Repository[]> {
  return queryRows(
    db,
    `${ACTIVE} ORDER BY lower(r.full_name) LIMIT 1000`,
    [],
    RepositoryRow,
    "active repositories",
  );
}

/** The active repository with this name (any case), if the app can act on it now. */
export async function findActiveRepository(
  db: Queryable,
  fullName: string,
): Promise<Repository | undefined> {
  const [repository] = await queryRows(
    db,
    `${ACTIVE} AND lower(r.full_name) = lower($1) ORDER BY r.id DESC LIMIT 1`,
    [fullName],
    RepositoryRow,
    `the active repository ${fullName}`,
  );
  return repository;
}

/**
 * The database's clock, to the microsecond: a reconciliation takes it before it reads GitHub, and
 * rows written after it (a webhook that came in meanwhile) are newer than what GitHub listed.
 */
export async function databaseTime(db: Queryable): Promise<string> {
  const { rows } = await db.query("SELECT now()::text AS now");
  return z.object({ now: z.string() }).parse(rows[0]).now;
}

/** An installation as GitHub lists it. */
export interface ListedInstallation {
  id: number;
  accountLogin: string | null;
  accountType: string | null;
  suspended: boolean;
}

/** A repository as GitHub lists it. */
export interface ListedRepository {
  id: number;
  fullName: string;
}

const StoredInstallation = z.object({
  account_login: z.string().nullable(),
  account_type: z.string().nullable(),
  suspended: z.boolean(),
  deleted: z.boolean(),
  newer: z.boolean(),
});

const StoredRepository = z.object({
  id: z.coerce.number(),
  installation_id: z.coerce.number(),
  full_name: z.string(),
  removed: z.boolean(),
  newer: z.boolean(),
});

/**
 * Brings an installation's row, and its repositories' when they are given, in line with what
 * GitHub listed since `listedSince` (databaseTime): listed repositories are added, renamed, moved
 * or restored, unlisted ones marked removed, and settings kept. Rows written since then stay as
 * they are. Resolves to the number of rows changed.
 */
export async function reconcileInstallation(
  pool: pg.Pool,
  listedSince: string,
  listed: ListedInstallation,
  repositories?: readonly ListedRepository[],
): Promise<number> {
  return withTransaction(pool, async (client) => {
    let changed = 0;
    const found = await client.query(
      `SELECT account_login, account_type, suspended_at IS NOT NULL AS suspended,
         deleted_at IS NOT NULL AS deleted, updated_at >= $2::timestamptz AS newer
       FROM installations WHERE id = $1 FOR UPDATE`,
      [listed.id, listedSince],
    );
    const stored = found.rows[0] && StoredInstallation.parse(found.rows[0]);
    const differs =
      !stored ||
      stored.deleted ||
      stored.suspended !== listed.suspended ||
      // GitHub's null leaves what is stored (upsertInstallation keeps it).
      (listed.accountLogin !== null && stored.account_login !== listed.accountLogin) ||
      (listed.accountType !== null && stored.account_type !== listed.accountType);
    if (differs && !stored?.newer) {
      await upsertInstallation(client, { ...listed, deleted: false });
      changed++;
    }
    if (!repositories) return changed;
    const ids = repositories.map((repository) => repository.id);
    const { rows } = await client.query(
      `SELECT id, installation_id, full_name, removed_at IS NOT NULL AS removed,
         updated_at >= $3::timestamptz AS newer
       FROM repositories WHERE installation_id = $1 OR id = ANY($2::bigint[]) FOR UPDATE`,
      [listed.id, ids, listedSince],
    );
    const known = new Map(rows.map((row) => StoredRepository.parse(row)).map((r) => [r.id, r]));
    for (const repository of repositories) {
      const row = known.get(repository.id);
      if (row?.newer) continue;
      if (
        !row ||
        row.removed ||
        row.installation_id !== listed.id ||
        row.full_name !== repository.fullName
      ) {
        await upsertRepository(client, {
          ...repository,
          installationId: listed.id,
          removed: false,
        });
        changed++;
      }
    }
    const unlisted = [...known.values()].filter(
      (row) =>
        row.installation_id === listed.id && !row.removed && !row.newer && !ids.includes(row.id),
    );
    for (const row of unlisted) {
      await upsertRepository(client, {
        id: row.id,
        installationId: listed.id,
        fullName: row.full_name,
        removed: true,
      });
      changed++;
    }
    return changed;
  });
}

/**
 * Marks deleted the installations GitHub no longer lists, but not those written since
 * `listedSince`. Resolves to how many.
 */
export async function markUnlistedInstallationsDeleted(
  pool: pg.Pool,
  listedSince: string,
  listedIds: readonly number[],
): Promise<number> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query(
      `SELECT id FROM installations
       WHERE deleted_at IS NULL AND updated_at < $1::timestamptz AND NOT (id = ANY($2::bigint[]))
       FOR UPDATE`,
      [listedSince, listedIds],
    );
    for (const row of rows) {
      await upsertInstallation(client, { id: z.coerce.number().parse(row.id), deleted: true });
    }
    return rows.length;
  });
}
