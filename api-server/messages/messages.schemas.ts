import { z } from 'zod';
import { listQuery } from '../core/pagination.js';
import { IdParam, ListOf, Metadata, QueryInteger, Timestamp } from '../core/schemas.js';
import { Part } from './message-body.schemas.js';

export { SendMessageBody } from './message-body.schemas.js';

export const STREAM_FORMAT = 'vendor-sdk/1';

export const Usage = z.object({ input_tokens: z.number().int(), output_tokens: z.number().int() }).meta({ id: 'Usage' });

export const Message = z
  .object({
    object: z.literal('message'),
    id: z.string(),
    conversation_id: z.string(),
    role: z.enum(['user', 'assistant', 'system']),
    content: z.string(),
    parts: z.array(Part).optional(),
    skill_ids: z.array(z.string()).nullable(),
    env: z.record(z.string(), z.string()).nullable(),
    status: z.enum(['completed', 'in_progress', 'failed']),
    usage: Usage.optional(),
    metadata: Metadata,
    created_at: Timestamp,
  })
  .meta({ id: 'Message' });

export const MessageList = ListOf(Message);

export const SendMessageQuery = z.object({
  stream: z
    .enum(['true', 'false'])
    .default('true')
    .transform((value) => value === 'true'),
});

export const ListMessagesQuery = listQuery('message', {});

export const MessageStreamParams = z.object({ conversation_id: IdParam, message_id: IdParam });
export const MessageStreamQuery = z.object({ after: QueryInteger(z.coerce.number().int().min(0).default(0)) });
