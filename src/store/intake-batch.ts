// The intake's first statement for a batch of deliveries: it records them (insert-or-ignore), reads
// the repositories and conversations they point at, and draws the new jobs' ids, in one round trip.
// On a busy machine each round trip waits to be scheduled twice (the server, then the app), so
// they, not the rows, set the intake's latency.
import { z } from "zod";
import { type DeliveryInput, deliveryParams, INSERT_DELIVERIES } from "./deliveries.ts";
import { type Repository, RepositoryRow } from "./installations.ts";
import { prepared, type Queryable } from "./sql.ts";
import { bigint, parseStored } from "./stored-value.ts";

const Row = z.object({
  fresh: z.array(z.string()),
  repositories: z.array(RepositoryRow),
  conversations: z.array(z.object({ repository_id: bigint, wanted: z.number().int(), id: bigint })),
  job_ids: z.array(bigint),
});

export interface BatchLookup {
  /** Delivery ids seen for the first time (an id or trigger key repeated in the batch: once). */
  fresh: Set<string>;
  repositories: Map<number, Repository>;
  /** Conversation ids by `${repositoryId}#${number}`, found as findConversation finds them. */
  conversations: Map<string, number>;
  /** Job ids drawn ahead, one per fresh delivery, ascending; those not used are skipped. */
  jobIds: number[];
}

export const conversationLookupKey = (repositoryId: number, number: number) =>
  `${repositoryId}#${number}`;

const SQL = `
WITH fresh AS (${INSERT_DELIVERIES})
SELECT
  (SELECT coalesce(json_agg(id), '[]') FROM fresh) AS fresh,
  (SELECT coalesce(json_agg(r), '[]') FROM repositories r WHERE r.id = ANY($7::bigint[]))
    AS repositories,
  (SELECT coalesce(json_agg(json_build_object(
            'repository_id', k.repository_id, 'wanted', k.number, 'id', c.id)), '[]')
     FROM unnest($8::bigint[], $9::int[]) AS k (repository_id, number)
     CROSS JOIN LATERAL (
       SELECT id FROM conversations
        WHERE repository_id = k.repository_id AND (pr_number = k.number OR number = k.number)
        ORDER BY pr_number = k.number DESC NULLS LAST LIMIT 1) c) AS conversations,
  (SELECT coalesce(json_agg(nextval(pg_get_serial_sequence('jobs', 'id'))), '[]')
     FROM generate_series(1, (SELECT count(*) FROM fresh))) AS job_ids`;

export async function recordAndLookUp(
  db: Queryable,
  deliveries: DeliveryInput[],
  items: Array<{ repositoryId: number; number: number }>,
): Promise<BatchLookup> {
  const { rows } = await db.query(
    prepared(db, SQL, [
      ...deliveryParams(deliveries),
      [...new Set(items.map((item) => item.repositoryId))],
      items.map((item) => item.repositoryId),
      items.map((item) => item.number),
    ]),
  );
  const row = parseStored(Row, rows[0], "the intake's batch lookup");
  const repositories = new Map(row.repositories.map((r) => [r.id, r]));
  const conversations = new Map<string, number>();
  for (const c of row.conversations)
    conversations.set(conversationLookupKey(c.repository_id, c.wanted), c.id);
  const jobIds = row.job_ids.sort((a, b) => a - b);
  return { fresh: new Set(row.fresh), repositories, conversations, jobIds };
}
