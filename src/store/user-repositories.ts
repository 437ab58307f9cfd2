// The repositories of the app's installations a person could push to, as GitHub listed them with
// the person's own token on the web: the chat face asks GitHub about these, not about every one.
import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { bigint, parseStored } from "./stored-value.ts";

export async function rememberPushableRepositories(
  db: Queryable,
  userId: number,
  repositoryIds: readonly number[],
): Promise<void> {
  await db.query(
    `INSERT INTO user_repositories (user_id, repository_ids) VALUES ($1, $2)
     ON CONFLICT (user_id) DO UPDATE SET repository_ids = $2, listed_at = now()`,
    [userId, repositoryIds],
  );
}

const listed = z.object({ repository_ids: z.array(bigint) });

/** The person's pushable repositories when last listed; undefined when they never were. */
export async function pushableRepositories(
  db: Queryable,
  userId: number,
): Promise<Set<number> | undefined> {
  const { rows } = await db.query(
    "SELECT repository_ids FROM user_repositories WHERE user_id = $1",
    [userId],
  );
  if (!rows[0]) return undefined;
  return new Set(parseStored(listed, rows[0], "a user_repositories row").repository_ids);
}
