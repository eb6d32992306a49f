import { type Kysely, sql } from 'kysely';

// `ssh_known_hosts`: the SSH host keys of a repository's remote (known_hosts lines), recorded at its
// first SSH sync and required of the server at every sync after; null until then.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table repositories add column ssh_known_hosts text`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table repositories drop column ssh_known_hosts`.execute(db);
}
