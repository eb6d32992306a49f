import type { Insertable, Selectable, Updateable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { ConversationsTable, SkillAccess, TenantSettings } from '../core/db/schema.js';

export type ConversationRow = Selectable<ConversationsTable>;
export type ConversationInsert = Insertable<ConversationsTable>;
export type ConversationUpdate = Updateable<ConversationsTable>;

/** The owning user with what a conversation needs to know of its tenant and role. */
export interface OwnerRow {
  user_id: string;
  user_status: 'active' | 'suspended';
  role_id: string | null;
  tenant_id: string;
  tenant_status: 'active' | 'suspended';
  integration_id: string;
  settings: TenantSettings;
  skill_access: SkillAccess | null;
}

export function findOwner(db: Db, userId: string): Promise<OwnerRow | undefined> {
  return db
    .selectFrom('users')
    .innerJoin('tenants', 'tenants.id', 'users.tenant_id')
    .leftJoin('roles', 'roles.id', 'users.role_id')
    .select([
      'users.id as user_id',
      'users.status as user_status',
      'users.role_id',
      'tenants.id as tenant_id',
      'tenants.status as tenant_status',
      'tenants.integration_id',
      'tenants.settings',
      'roles.skill_access',
    ])
    .where('users.id', '=', userId)
    .executeTakeFirst();
}

/** Conversations with their tenant's integration, status and settings (for scope and suspension checks). */
function scopedConversations(db: Db) {
  return db
    .selectFrom('conversations')
    .innerJoin('tenants', 'tenants.id', 'conversations.tenant_id')
    .selectAll('conversations')
    .select(['tenants.integration_id', 'tenants.status as tenant_status', 'tenants.settings as tenant_settings']);
}

export function findConversation(db: Db, conversationId: string) {
  return scopedConversations(db).where('conversations.id', '=', conversationId).executeTakeFirst();
}

export type ScopedConversationRow = NonNullable<Awaited<ReturnType<typeof findConversation>>>;

export function findConversationByExternalId(db: Db, tenantId: string, externalId: string) {
  return scopedConversations(db)
    .where('conversations.tenant_id', '=', tenantId)
    .where('conversations.external_id', '=', externalId)
    .executeTakeFirst();
}

export function insertConversationIfAbsent(db: Db, row: ConversationInsert): Promise<ConversationRow | undefined> {
  return db
    .insertInto('conversations')
    .values(row)
    .onConflict((oc) => oc.columns(['tenant_id', 'external_id']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export function updateConversation(db: Db, conversationId: string, changes: ConversationUpdate): Promise<ConversationRow> {
  return db.updateTable('conversations').set(changes).where('id', '=', conversationId).returningAll().executeTakeFirstOrThrow();
}

export async function deleteConversation(db: Db, conversationId: string): Promise<void> {
  await db.deleteFrom('conversations').where('id', '=', conversationId).execute();
}

/** Deletes the conversation unless a message was appended meanwhile (by a concurrent request). */
export async function deleteConversationIfEmpty(db: Db, conversationId: string): Promise<void> {
  await db.deleteFrom('conversations').where('id', '=', conversationId).where('message_count', '=', 0).execute();
}

/** A run ended on the conversation: its last activity and, when the runtime reported one, its session. */
export async function recordRunOnConversation(
  db: Db,
  conversationId: string,
  run: { at: Date; sessionId?: string | undefined },
): Promise<void> {
  await db
    .updateTable('conversations')
    .set({ last_message_at: run.at, updated_at: run.at, ...(run.sessionId && { session_id: run.sessionId }) })
    .where('id', '=', conversationId)
    .execute();
}

/** What decides a run's runner after its turn, read at the turn's end (a PATCH may have changed the mode meanwhile). */
export function conversationRunMode(db: Db, conversationId: string) {
  return db
    .selectFrom('conversations')
    .innerJoin('tenants', 'tenants.id', 'conversations.tenant_id')
    .select(['conversations.mode', 'conversations.idle_ttl_seconds', 'tenants.settings'])
    .where('conversations.id', '=', conversationId)
    .executeTakeFirst();
}
