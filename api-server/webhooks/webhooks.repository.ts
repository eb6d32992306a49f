import type { Db } from '../core/db/database.js';

/** How long a delivery id is remembered: longer than GitHub's redelivery window. */
const DELIVERY_MEMORY_MS = 7 * 24 * 3600 * 1000;

/** Records a delivery id; false when it was seen before (a redelivery). Forgets ids past their memory. */
export async function recordDelivery(db: Db, deliveryId: string, now: Date): Promise<boolean> {
  await db
    .deleteFrom('webhook_deliveries')
    .where('received_at', '<', new Date(now.getTime() - DELIVERY_MEMORY_MS))
    .execute();
  const inserted = await db
    .insertInto('webhook_deliveries')
    .values({ delivery_id: deliveryId, received_at: now })
    .onConflict((oc) => oc.column('delivery_id').doNothing())
    .executeTakeFirst();
  return Number(inserted.numInsertedOrUpdatedRows ?? 0n) > 0;
}
