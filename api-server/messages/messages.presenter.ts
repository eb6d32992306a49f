import type { z } from 'zod';
import type { MessageRow } from './messages.repository.js';
import type { Message } from './messages.schemas.js';

/** Write-only fields (`secrets`) have no column, so they cannot be presented by mistake. */
export function presentMessage(row: MessageRow): z.output<typeof Message> {
  return {
    object: 'message',
    id: row.id,
    conversation_id: row.conversation_id,
    role: row.role,
    content: row.content,
    ...(row.parts && { parts: row.parts }),
    skill_ids: row.skill_ids,
    env: row.env,
    status: row.status,
    ...(row.usage && { usage: row.usage }),
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
  };
}
