import type { Selectable } from 'kysely';
import { type Db, json } from '../core/db/database.js';
import type { MessagesTable } from '../core/db/schema.js';

export type MessageRow = Selectable<MessagesTable>;

export function findMessage(db: Db, conversationId: string, messageId: string): Promise<MessageRow | undefined> {
  return db.selectFrom('messages').selectAll().where('conversation_id', '=', conversationId).where('id', '=', messageId).executeTakeFirst();
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

/**
 * A run's outcome on its assistant message, stored by the node hosting it (`node_id`, which stays as
 * the node that ended it); undefined when the message is gone, or another node took the run over
 * (this one was taken for dead): its outcome is that node's to store.
 */
export function storeRunOutcome(
  db: Db,
  messageId: string,
  nodeId: string,
  result: { status: 'completed' | 'failed'; content: string; parts: unknown[]; usage: unknown },
  now: Date,
): Promise<MessageRow | undefined> {
  return db
    .updateTable('messages')
    .set({
      status: result.status,
      content: result.content,
      parts: json(result.parts),
      usage: result.usage ? json(result.usage) : null,
      updated_at: now,
    })
    .where('id', '=', messageId)
    .where('node_id', '=', nodeId)
    .returningAll()
    .executeTakeFirst();
}
