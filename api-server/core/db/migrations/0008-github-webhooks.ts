import { type Kysely, sql } from 'kysely';

// GitHub push webhooks:
// - webhook_deliveries: the X-GitHub-Delivery ids already acted on, so a redelivery runs once
//   (kept for a week, longer than GitHub redelivers);
// - repositories.sync_requested: a push arrived while a sync was in flight; the worker runs one
//   more sync when the current one ends, so the pushed commit is not missed.
const STATEMENTS = [
  `create table webhook_deliveries (
     delivery_id text primary key,
     received_at timestamptz not null
   )`,
  `create index webhook_deliveries_received_at on webhook_deliveries (received_at)`,
  `alter table repositories add column sync_requested boolean not null default false`,
];

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}
