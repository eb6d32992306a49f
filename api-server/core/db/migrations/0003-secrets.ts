import { type Kysely, sql } from 'kysely';

// One table for the four secret scopes, keyed by (scope, scope id, alias). The owner of each scope
// is also a generated column with a cascading foreign key, so deprovisioning a tenant, user or
// conversation, or deleting a message, leaves no ciphertext behind, and a secret cannot be vaulted
// for an owner that does not exist.
const STATEMENTS = [
  `
    create table secrets (
      scope text not null check (scope in ('tenant', 'user', 'conversation', 'run')),
      scope_id text collate "C" not null,
      alias text collate "C" not null,
      value_ciphertext text not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      tenant_id text collate "C" generated always as (case when scope = 'tenant' then scope_id end) stored
        references tenants (id) on delete cascade,
      user_id text collate "C" generated always as (case when scope = 'user' then scope_id end) stored
        references users (id) on delete cascade,
      conversation_id text collate "C" generated always as (case when scope = 'conversation' then scope_id end) stored
        references conversations (id) on delete cascade,
      message_id text collate "C" generated always as (case when scope = 'run' then scope_id end) stored
        references messages (id) on delete cascade,
      primary key (scope, scope_id, alias)
    )
  `,
  // The cascades look rows up by owner; without these each owner delete would scan the table.
  `create index secrets_by_tenant on secrets (tenant_id) where tenant_id is not null`,
  `create index secrets_by_user on secrets (user_id) where user_id is not null`,
  `create index secrets_by_conversation on secrets (conversation_id) where conversation_id is not null`,
  `create index secrets_by_message on secrets (message_id) where message_id is not null`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table secrets`.execute(db);
}
