import { type Db, json } from '../../api-server/core/db/database.js';

/** An assistant message written straight to the database, as a run of another process would have stored it. */
export async function insertAssistantMessage(
  db: Db,
  fields: { id: string; conversationId: string; status: 'in_progress' | 'completed'; nodeId: string | null; requestId?: string },
): Promise<void> {
  const now = new Date();
  await db
    .insertInto('messages')
    .values({
      id: fields.id,
      conversation_id: fields.conversationId,
      role: 'assistant',
      content: '',
      parts: null,
      skill_ids: null,
      env: null,
      status: fields.status,
      usage: null,
      metadata: json({}),
      node_id: fields.nodeId,
      request_id: fields.requestId ?? null,
      created_at: now,
      updated_at: now,
    })
    .execute();
}
