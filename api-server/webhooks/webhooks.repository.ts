import type { Db } from '../core/db/database.js';

/**
 * How long a delivery is remembered, longer than GitHub redelivers; a push older than this is not
 * acted on at all, so a delivery forgotten here cannot be replayed.
 */
export const REPLAY_WINDOW_MS = 7 * 24 * 3600 * 1000;

/** Records a delivery by its body's digest; false when it was seen before (a redelivery or a replay). Forgets past the window. */
export async function recordDelivery(db: Db, bodyDigest: string, now: Date): Promise<boolean> {
  await db
    .deleteFrom('webhook_deliveries')
    .where('received_at', '<', new Date(now.getTime() - REPLAY_WINDOW_MS))
    .execute();
  const inserted = await db
    .insertInto('webhook_deliveries')
    .values({ body_digest: bodyDigest, received_at: now })
    .onConflict((oc) => oc.column('body_digest').doNothing())
    .executeTakeFirst();
  return Number(inserted.numInsertedOrUpdatedRows ?? 0n) > 0;
}
