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
      node_id text,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )
  `,
  `create index messages_by_conversation on messages (conversation_id, id)`,
  // At most one run in flight per conversation, enforced by the database so two nodes cannot both start one.
  `
    create unique index messages_one_run_in_flight on messages (conversation_id)
    where role = 'assistant' and status = 'in_progress'
  `,
  // Every line of a run's stream, kept for the life of the conversation so a client can re-attach.
  `
    create table run_lines (
      message_id text collate "C" not null references messages (id) on delete cascade,
      seq integer not null,
      line jsonb not null,
      created_at timestamptz not null,
      primary key (message_id, seq)
    )
  `,
  // The agent runtime's session transcript, mirrored here so any runner on any node can resume it.
  `
    create table agent_session_entries (
      conversation_id text collate "C" not null references conversations (id) on delete cascade,
      session_key text not null,
      seq bigint generated always as identity,
      entry_uuid text,
      entry jsonb not null,
      primary key (conversation_id, session_key, seq)
    )
  `,
  // Entries carrying a uuid are written at most once (the SDK retries appends).
  `
    create unique index agent_session_entries_uuid on agent_session_entries (conversation_id, session_key, entry_uuid)
    where entry_uuid is not null
  `,
  // API server processes and their heartbeats: a run whose node stopped beating is failed.
  `
    create table nodes (
      id text primary key,
      started_at timestamptz not null,
      heartbeat_at timestamptz not null
    )
  `,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table nodes, agent_session_entries, run_lines, messages, conversations`.execute(db);
}
