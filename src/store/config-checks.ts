import type { Queryable } from "./sql.ts";

/** True the first time a repository's head is claimed for a config check, false after. */
export async function claimConfigCheck(
  db: Queryable,
  repositoryId: number,
  headSha: string,
): Promise<boolean> {
  const { rows } = await db.query(
    `INSERT INTO config_checks (repository_id, head_sha) VALUES ($1, $2)
     ON CONFLICT DO NOTHING RETURNING 1`,
    [repositoryId, headSha],
  );
  return rows.length > 0;
}
