import type { Selectable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { MessagesTable } from '../core/db/schema.js';

export type MessageRow = Selectable<MessagesTable>;

export function findMessage(db: Db, conversationId: string, messageId: string): Promise<MessageRow | undefined> {
  return db
    .selectFrom('messages')
    .selectAll()
    .where('conversation_id', '=', conversationId)
    .where('id', '=', messageId)
    .executeTakeFirst();
}

export function findRunInFlight(db: Db, conversationId: string): Promise<{ id: string } | undefined> {
  return db
    .selectFrom('messages')
    .select('id')
    .where('conversation_id', '=', conversationId)
    .where('role', '=', 'assistant')
    .where('status', '=', 'in_progress')
    .executeTakeFirst();
}

export function selectMessages(db: Db, conversationId: string) {
  return db.selectFrom('messages').selectAll().where('conversation_id', '=', conversationId);
}
