import { type Kysely, sql } from 'kysely';

// `request_id`: the request that created the message (the caller's X-Request-Id, or ours), so
// what is said of its run later (by the egress proxy, a sweep on another node) names the same id
// as that request's log lines. Null for messages stored before.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table messages add column request_id text`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table messages drop column request_id`.execute(db);
}
