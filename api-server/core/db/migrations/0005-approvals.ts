import { type Kysely, sql } from 'kysely';

// Approvals hang off the assistant message parked on them; deleting the conversation (or the
// message, or deprovisioning the tenant) removes them with it.
const STATEMENTS = [
  `
    create table approvals (
      id text collate "C" primary key,
      tenant_id text collate "C" not null references tenants (id) on delete cascade,
      conversation_id text collate "C" not null references conversations (id) on delete cascade,
      message_id text collate "C" not null references messages (id) on delete cascade,
      status text not null check (status in ('pending', 'approved', 'denied', 'expired')),
      reason text not null,
      requested_items jsonb not null,
      expires_at timestamptz not null,
      resolved_by text,
      resolved_at timestamptz,
      note text,
      created_at timestamptz not null,
      updated_at timestamptz not null
    )
  `,
  // Listing per conversation walks this index; the expiry sweep reads only pending rows.
  `create index approvals_by_conversation on approvals (conversation_id, id)`,
  `create index approvals_pending_by_expiry on approvals (expires_at) where status = 'pending'`,
  `create index approvals_by_message on approvals (message_id)`,
  `create index approvals_by_tenant on approvals (tenant_id)`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table approvals`.execute(db);
}
