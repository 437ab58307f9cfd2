// What the automations' schedules need of the store: the repositories the app can act on, with
// what their file said when last read, and whether an automation's last scheduled run is still on.
import { z } from "zod";
import { type Repository, RepositoryRow } from "./installations.ts";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored, queryRows } from "./stored-value.ts";

/** A repository the app can act on: never a removed one. */
export type AutomationRepository = Repository;

/**
 * The repositories the app can act on now (not removed, on a live installation), all of them or
 * those of one installation or one repository.
 */
export async function activeRepositories(
  db: Queryable,
  scope: { installationId?: number; repositoryId?: number } = {},
): Promise<AutomationRepository[]> {
  return queryRows(
    db,
    `SELECT r.* FROM repositories r JOIN installations i ON i.id = r.installation_id
      WHERE r.removed_at IS NULL AND i.suspended_at IS NULL AND i.deleted_at IS NULL
        AND ($1::bigint IS NULL OR r.installation_id = $1)
        AND ($2::bigint IS NULL OR r.id = $2)
      ORDER BY r.id`,
    [scope.installationId ?? null, scope.repositoryId ?? null],
    RepositoryRow,
    "active repositories",
  );
}

/** The id of the automation's scheduled run that has not finished yet, if there is one. */
export async function unfinishedScheduledRun(
  db: Queryable,
  repositoryId: number,
  automation: string,
): Promise<number | undefined> {
  const { rows } = await db.query(
    `SELECT id FROM jobs
      WHERE repository_id = $1 AND trigger = 'automation' AND number IS NULL
        AND finished_at IS NULL AND context->'automation'->>'name' = $2
      ORDER BY id LIMIT 1`,
    [repositoryId, automation],
  );
  return rows[0] && parseStored(z.object({ id: bigint }), rows[0], "a jobs row").id;
}
