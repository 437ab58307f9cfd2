import type { Queryable } from "./sql.ts";

export interface InstallationInput {
  id: number;
  accountLogin?: string | null;
  accountType?: string | null;
  /** true marks it suspended, false clears that, undefined leaves it as stored. */
  suspended?: boolean;
  deleted?: boolean;
}

export interface Repository {
  id: number;
  installationId: number;
  fullName: string;
  settings: Record<string, unknown>;
  /** The trigger settings of `.github/vmpilot.yml` as last read; null when unknown or changed. */
  fileSettings: Record<string, unknown> | null;
  removedAt: Date | null;
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

interface RepositoryRow {
  id: string;
  installation_id: string;
  full_name: string;
  settings: Record<string, unknown>;
  file_settings: Record<string, unknown> | null;
  removed_at: Date | null;
}

function toRepository(row: RepositoryRow): Repository {
  return {
    id: Number(row.id),
    installationId: Number(row.installation_id),
    fullName: row.full_name,
    settings: row.settings,
    fileSettings: row.file_settings,
    removedAt: row.removed_at,
  };
}

export async function getRepository(db: Queryable, id: number): Promise<Repository | undefined> {
  const { rows } = await db.query<RepositoryRow>("SELECT * FROM repositories WHERE id = $1", [id]);
  return rows[0] && toRepository(rows[0]);
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
  const { rows } = await db.query<RepositoryRow>(
    `${ACTIVE} ORDER BY lower(r.full_name) LIMIT 1000`,
  );
  return rows.map(toRepository);
}

/** The active repository with this name (any case), if the app can act on it now. */
export async function findActiveRepository(
  db: Queryable,
  fullName: string,
): Promise<Repository | undefined> {
  const { rows } = await db.query<RepositoryRow>(
    `${ACTIVE} AND lower(r.full_name) = lower($1) ORDER BY r.id DESC LIMIT 1`,
    [fullName],
  );
  return rows[0] && toRepository(rows[0]);
}
