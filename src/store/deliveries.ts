import type { Queryable } from "./sql.ts";

export interface DeliveryInput {
  /** The X-GitHub-Delivery header. */
  id: string;
  event: string;
  action?: string | null;
  installationId?: number | null;
  repositoryId?: number | null;
}

/** Insert-or-ignore: true the first time a delivery id is seen, false for a redelivery. */
export async function recordDelivery(db: Queryable, delivery: DeliveryInput): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO deliveries (id, event, action, installation_id, repository_id)
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
    [
      delivery.id,
      delivery.event,
      delivery.action ?? null,
      delivery.installationId ?? null,
      delivery.repositoryId ?? null,
    ],
  );
  return rowCount === 1;
}
