import { z } from "zod";
import type { Queryable } from "./sql.ts";
import { queryRows } from "./stored-value.ts";

export interface DeliveryInput {
  /** The X-GitHub-Delivery header. */
  id: string;
  event: string;
  action?: string | null;
  installationId?: number | null;
  repositoryId?: number | null;
  /** The triggering event's own identity (see intake/deliveries.ts); unique per repository. */
  triggerKey?: string | null;
}

/**
 * Insert-or-ignore: true the first time a delivery id (and its trigger key) is seen, false for a
 * redelivery or a replayed event.
 */
export async function recordDelivery(db: Queryable, delivery: DeliveryInput): Promise<boolean> {
  return (await recordDeliveries(db, [delivery])).has(delivery.id);
}

/**
 * Insert-or-ignore for many deliveries in one statement; returns the ids seen for the first time.
 * An id or a trigger key repeated within the list is recorded (and returned) once.
 */
export async function recordDeliveries(
  db: Queryable,
  deliveries: DeliveryInput[],
): Promise<Set<string>> {
  const rows = await queryRows(
    db,
    INSERT_DELIVERIES,
    deliveryParams(deliveries),
    z.object({ id: z.string() }),
    "new deliveries rows",
  );
  return new Set(rows.map((row) => row.id));
}

/** Parameters $1 to $6; no conflict target: a known id and a known trigger key are both skipped. */
export const INSERT_DELIVERIES = `
  INSERT INTO deliveries (id, event, action, installation_id, repository_id, trigger_key)
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[])
  ON CONFLICT DO NOTHING RETURNING id`;

export function deliveryParams(deliveries: DeliveryInput[]): unknown[] {
  return [
    deliveries.map((d) => d.id),
    deliveries.map((d) => d.event),
    deliveries.map((d) => d.action ?? null),
    deliveries.map((d) => d.installationId ?? null),
    deliveries.map((d) => d.repositoryId ?? null),
    deliveries.map((d) => d.triggerKey ?? null),
  ];
}
