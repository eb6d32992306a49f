import { type Kysely, sql } from 'kysely';

// GitHub deliveries are remembered by the SHA-256 of their signed body rather than by the
// X-GitHub-Delivery header, which the signature does not cover (a replay under a fresh id went
// through). Rows kept from before hold header ids; they expire with the week's window.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_deliveries rename column delivery_id to body_digest`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhook_deliveries rename column body_digest to delivery_id`.execute(db);
}
