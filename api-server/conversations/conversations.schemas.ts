import { z } from 'zod';
import { listQuery } from '../core/pagination.js';
import { idPattern } from '../core/ids.js';
import { ExternalId, IdParam, ListOf, Metadata, Storage, Timestamp } from '../core/schemas.js';
import { Filler, OnCapacity, SendMessageBody } from '../messages/message-body.schemas.js';

export const MIN_IDLE_TTL_SECONDS = 60;
export const MAX_IDLE_TTL_SECONDS = 86400;
export const DEFAULT_IDLE_TTL_SECONDS = 300;

export const RuntimeMode = z.enum(['pooled', 'warm']);
const IdleTtl = z.number().int().min(MIN_IDLE_TTL_SECONDS).max(MAX_IDLE_TTL_SECONDS);
const SkillIds = z.array(z.string().min(1).max(100)).max(1000);

export const Conversation = z
  .object({
    object: z.literal('conversation'),
    id: z.string(),
    external_id: z.string().nullable(),
    tenant_id: z.string(),
    user_id: z.string(),
    title: z.string().nullable(),
    status: z.enum(['active', 'archived']),
    context: z.object({ role_id: z.string(), repository_id: z.string().nullable(), skill_ids: z.array(z.string()) }),
    selected_skill_ids: z.array(z.string()).nullable(),
    runtime: z.object({
      agent_type: z.string(),
      mode: RuntimeMode,
      idle_ttl_seconds: z.number().int().nullable(),
      sandbox_state: z.enum(['warm', 'cold']),
      expires_at: Timestamp.nullable(),
    }),
    filler: Filler.nullable(),
    storage: Storage,
    message_count: z.number().int(),
    last_message_at: Timestamp.nullable(),
    metadata: Metadata,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Conversation' });

export const ConversationList = ListOf(Conversation);

const RuntimeInput = z.object({
  agent_type: z.string().trim().min(1).max(64).optional(),
  mode: RuntimeMode.optional(),
  idle_ttl_seconds: IdleTtl.optional(),
});

/** Fields shared by create, upsert and update. */
const conversationFields = {
  title: z.string().trim().max(255).nullable().optional(),
  selected_skill_ids: SkillIds.nullable().optional(),
  runtime: RuntimeInput.optional(),
  filler: Filler.nullable().optional(),
  metadata: Metadata.optional(),
};

export const CreateConversationBody = z.object({
  user_id: z.string().min(1).max(100).optional(),
  external_id: ExternalId.optional(),
  on_capacity: OnCapacity.optional(),
  ...conversationFields,
  initial_message: SendMessageBody.optional().describe('When present, the response is the NDJSON stream of its run'),
});

export const UpsertConversationBody = z.object({
  user_id: z.string().min(1).max(100).optional(),
  on_capacity: OnCapacity.optional(),
  ...conversationFields,
  initial_message: SendMessageBody.optional().describe('When present, the response is the NDJSON stream of its run'),
});

export const PatchConversationBody = z.object({
  status: z.enum(['active', 'archived']).optional(),
  ...conversationFields,
});

export const ListConversationsQuery = listQuery('conversation', {
  user_id: z.string().regex(idPattern('user'), 'must be a user id (usr_...)').optional(),
  tenant_id: z.string().regex(idPattern('tenant'), 'must be a tenant id (tnt_...)').optional(),
}).refine((q) => Boolean((q as { user_id?: string }).user_id) !== Boolean((q as { tenant_id?: string }).tenant_id), {
  message: 'exactly one of user_id and tenant_id is required',
  path: ['user_id'],
});

export const ConversationIdParams = z.object({ conversation_id: IdParam });
export const ConversationExternalIdParams = z.object({ external_id: ExternalId });
export const ByExternalIdQuery = z.object({
  tenant_id: z.string().min(1).max(100).optional().describe('Required with the service key: external ids are unique per tenant'),
});
