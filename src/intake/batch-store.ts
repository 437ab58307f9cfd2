// Multi-row forms of store/deliveries.recordDelivery and store/jobs.insertJob for the intake's
// group commit: one statement for a whole batch instead of one per delivery.
// They belong in src/store beside their single-row forms; the intake keeps them until it moves.
import type { DeliveryInput } from "../store/deliveries.ts";
import type { NewJob } from "../store/jobs.ts";
import type { Queryable } from "../store/sql.ts";

/** Insert-or-ignore; returns the ids that were new (a repeated id counts once). */
export async function recordDeliveries(
  db: Queryable,
  deliveries: DeliveryInput[],
): Promise<Set<string>> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO deliveries (id, event, action, installation_id, repository_id)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[])
     ON CONFLICT (id) DO NOTHING RETURNING id`,
    [
      deliveries.map((d) => d.id),
      deliveries.map((d) => d.event),
      deliveries.map((d) => d.action ?? null),
      deliveries.map((d) => d.installationId ?? null),
      deliveries.map((d) => d.repositoryId ?? null),
    ],
  );
  return new Set(rows.map((row) => row.id));
}

/** Inserts the jobs and returns their ids, in input order. */
export async function insertJobs(
  db: Queryable,
  jobs: Array<NewJob & { deliveryId: string }>,
): Promise<number[]> {
  const { rows } = await db.query<{ id: string; ord: string }>(
    `WITH input AS (
       SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::int[],
         $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::text[], $12::jsonb[])
         WITH ORDINALITY AS t(chat_id, installation_id, repository_id, repo, number, trigger,
           command, requester, instruction, trigger_comment_id, delivery_id, context, ord)
     ), inserted AS (
       INSERT INTO jobs (chat_id, installation_id, repository_id, repo, number, trigger, command,
         requester, instruction, trigger_comment_id, delivery_id, context)
       SELECT chat_id, installation_id, repository_id, repo, number, trigger, command, requester,
         instruction, trigger_comment_id, delivery_id, context
       FROM input ORDER BY ord
       RETURNING id, delivery_id
     )
     SELECT inserted.id, input.ord FROM inserted JOIN input USING (delivery_id)`,
    [
      jobs.map((j) => j.chatId),
      jobs.map((j) => j.installationId),
      jobs.map((j) => j.repositoryId),
      jobs.map((j) => j.repo),
      jobs.map((j) => j.number),
      jobs.map((j) => j.trigger),
      jobs.map((j) => j.command ?? null),
      jobs.map((j) => j.requester),
      jobs.map((j) => j.instruction ?? ""),
      jobs.map((j) => j.triggerCommentId ?? null),
      jobs.map((j) => j.deliveryId),
      jobs.map((j) => JSON.stringify(j.context ?? {})),
    ],
  );
  const ids: number[] = new Array(jobs.length);
  for (const row of rows) ids[Number(row.ord) - 1] = Number(row.id);
  return ids;
}
