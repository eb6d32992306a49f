import { type Kysely, sql } from 'kysely';

// `allowed_hosts`: the destinations a vaulted value may be sent to (egress-proxy/secret-binding.ts),
// beside its ciphertext; null is unbound (any destination), as every value stored before.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table secrets add column allowed_hosts text[]`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table secrets drop column allowed_hosts`.execute(db);
}
