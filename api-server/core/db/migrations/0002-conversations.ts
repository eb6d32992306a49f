import { type Kysely, sql } from 'kysely';

const STATEMENTS = [
  `
    create table conversations (
      id text collate "C" primary key,
      tenant_id text collate "C" not null references tenants (id) on delete cascade,
      user_id text collate "C" not null references users (id) on delete cascade,
      external_id text,
      title text,
      status text not null,
      context jsonb not null,
      selected_skill_ids jsonb,
      agent_type text not null,
      mode text not null,
      idle_ttl_seconds integer,
      sandbox_state text not null,
      sandbox_expires_at timestamptz,
      filler jsonb,
      storage jsonb not null,
      session_id text,
      message_count integer not null default 0,
      last_message_at timestamptz,
      metadata jsonb not null,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      unique (tenant_id, external_id)
    )
  `,
  `create index conversations_by_user on conversations (user_id, id)`,
  `create index conversations_by_tenant on conversations (tenant_id, id)`,
  `
    create table messages (
      id text collate "C" primary key,
      conversation_id text collate "C" not null references conversations (id) on delete cascade,
      role text not null,
      content text not null,
      parts jsonb,
      skill_ids jsonb,
      env jsonb,
      status text not null,
      usage jsonb,
      metadata jsonb not null,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )
  `,
  `create index messages_by_conversation on messages (conversation_id, id)`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table messages, conversations`.execute(db);
}
