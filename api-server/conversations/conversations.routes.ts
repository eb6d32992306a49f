import type { Context } from 'koa';
import type { AppDeps } from '../deps.js';
import { NDJSON, type RouteResult } from '../core/http/route-result.js';
import { defineRoute } from '../define-route.js';
import type { RateClass } from '../core/rate-limit.js';
import { StreamLine } from '../messages/message-body.schemas.js';
import type { SendBody } from '../messages/messages.service.js';
import { sendAndRespond } from '../messages/send.js';
import { platformLine } from '../runs/run-stream.js';
import { deleteConversationIfEmpty, type ScopedConversationRow } from './conversations.repository.js';
import { mapPage } from '../core/pagination.js';
import {
  ByExternalIdQuery,
  Conversation,
  ConversationExternalIdParams,
  ConversationIdParams,
  ConversationList,
  CreateConversationBody,
  ListConversationsQuery,
  PatchConversationBody,
  UpsertConversationBody,
} from './conversations.schemas.js';
import {
  createConversation,
  getConversationByExternalId,
  getConversationInScope,
  listConversations,
  patchConversation,
  presentConversation,
  removeConversation,
  upsertConversation,
} from './conversations.service.js';

const tag = 'Conversations';

/**
 * Create and upsert with `initial_message`: the run's stream, led by the conversation. When the
 * message is refused before its run starts (skills, busy, capacity), a conversation this request
 * created is removed again, so the refusal changes nothing and a retry can create it afresh.
 */
async function streamInitialMessage(
  deps: AppDeps,
  conversation: ScopedConversationRow,
  created: boolean,
  message: SendBody,
  conversationOnCapacity: 'reject' | 'hold' | undefined,
  ctx: Context,
  requestId: string,
): Promise<RouteResult> {
  try {
    return await sendAndRespond(deps, conversation, message, {
      stream: true,
      onCapacity: message.on_capacity ?? conversationOnCapacity ?? 'reject',
      leadingLines: [platformLine('conversation', { conversation: presentConversation(conversation) })],
      baseUrl: deps.config.publicUrl ?? `${ctx.protocol}://${ctx.host}`,
      requestId,
      extraHeaders: { 'X-Service-Conversation-Id': conversation.id },
      bodyPointer: '/initial_message',
    });
  } catch (error) {
    if (created) await deleteConversationIfEmpty(deps.db, conversation.id);
    throw error;
  }
}
const common = {
  401: { description: 'Missing or invalid credential' },
  403: { description: 'Beyond the token’s user, or tenant suspended (tenant-suspended)' },
};
const notFound = { 404: { description: 'No such conversation' } };

/** Creating or continuing a conversation with an initial message is a message send. */
function sendsInitialMessage(rawBody: unknown): RateClass {
  const initial = typeof rawBody === 'object' && rawBody !== null ? (rawBody as { initial_message?: unknown }).initial_message : undefined;
  return initial === undefined || initial === null ? 'other' : 'message-send';
}

export const conversationRoutes = [
  defineRoute({
    method: 'post',
    path: '/conversations',
    operationId: 'createConversation',
    summary: 'Create a conversation and snapshot its context',
    tag,
    auth: 'service-or-user',
    rateClass: sendsInitialMessage,
    body: CreateConversationBody,
    bodyExample: {
      user_id: 'usr_01JD4Z8K5M2N3P4Q5R6S7T8V9W',
      external_id: 'ticket-1234',
      title: 'Quarterly report',
      runtime: { mode: 'warm', idle_ttl_seconds: 600 },
      initial_message: { content: 'Summarise the attached report.' },
    },
    idempotent: true,
    responses: {
      200: { description: 'With initial_message: the run as NDJSON, led by a conversation line', contentType: NDJSON, schema: StreamLine },
      201: { description: 'Created', schema: Conversation },
      ...common,
      404: { description: 'No such user' },
      409: { description: 'external_id taken (external-id-conflict)' },
      422: { description: 'Invalid body, role-required, skills outside the context, TTL above the cap' },
      429: { description: 'initial_message: capacity-exhausted, with Retry-After' },
      503: { description: 'initial_message: shutting-down (this node takes no new messages; retry)' },
    },
    handler: async ({ deps, principal, body, ctx, requestId }) => {
      const created = await createConversation(deps, principal, body);
      if (!body.initial_message) return { status: 201, body: presentConversation(created) };
      const conversation = await getConversationInScope(deps, principal, created.id);
      return streamInitialMessage(deps, conversation, true, body.initial_message, body.on_capacity, ctx, requestId);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/conversations',
    operationId: 'listConversations',
    summary: 'List the conversations of a user or of a tenant (exactly one of user_id, tenant_id)',
    tag,
    auth: 'service-or-user',
    query: ListConversationsQuery,
    responses: { 200: { description: 'A page', schema: ConversationList }, 400: { description: 'Bad query' }, ...common },
    handler: async ({ deps, principal, query }) => ({
      status: 200,
      body: mapPage(await listConversations(deps, principal, query), presentConversation),
    }),
  }),
  defineRoute({
    method: 'put',
    path: '/conversations/by-external-id/:external_id',
    operationId: 'upsertConversation',
    summary: 'Continue or create a conversation keyed on the host’s conversation id',
    tag,
    auth: 'service-or-user',
    rateClass: sendsInitialMessage,
    params: ConversationExternalIdParams,
    body: UpsertConversationBody,
    bodyExample: { user_id: 'usr_01JD4Z8K5M2N3P4Q5R6S7T8V9W', title: 'Quarterly report', metadata: { ticket: '1234' } },
    responses: {
      200: {
        description:
          'Existed; provided fields merged. With initial_message (created or not): the run as NDJSON, led by a conversation line',
        schema: Conversation,
      },
      201: { description: 'Created', schema: Conversation },
      ...common,
      404: { description: 'No such user' },
      409: { description: 'initial_message on an archived conversation (conversation-archived), or a run in flight' },
      422: { description: 'Invalid body, immutable field mismatch, role-required' },
      429: { description: 'initial_message: capacity-exhausted, with Retry-After' },
      503: { description: 'initial_message: shutting-down (this node takes no new messages; retry)' },
    },
    handler: async ({ deps, principal, params, body, ctx, requestId }) => {
      const { created, conversation } = await upsertConversation(deps, principal, params.external_id, body);
      if (!body.initial_message) return { status: created ? 201 : 200, body: presentConversation(conversation) };
      return streamInitialMessage(deps, conversation, created, body.initial_message, body.on_capacity, ctx, requestId);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/conversations/by-external-id/:external_id',
    operationId: 'getConversationByExternalId',
    summary: 'Get a conversation by external id (service key: with tenant_id)',
    tag,
    auth: 'service-or-user',
    params: ConversationExternalIdParams,
    query: ByExternalIdQuery,
    responses: {
      200: { description: 'The conversation', schema: Conversation },
      400: { description: 'tenant_id missing' },
      ...common,
      ...notFound,
    },
    handler: async ({ deps, principal, params, query }) => ({
      status: 200,
      body: presentConversation(await getConversationByExternalId(deps, principal, params.external_id, query.tenant_id)),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/conversations/by-external-id/:external_id',
    operationId: 'deleteConversationByExternalId',
    summary: 'Delete a conversation and its history by external id (service key: with tenant_id)',
    tag,
    auth: 'service-or-user',
    params: ConversationExternalIdParams,
    query: ByExternalIdQuery,
    responses: { 204: { description: 'Deleted' }, 400: { description: 'tenant_id missing' }, ...common, ...notFound },
    handler: async ({ deps, principal, params, query }) => {
      const conversation = await getConversationByExternalId(deps, principal, params.external_id, query.tenant_id);
      await removeConversation(deps, conversation);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/conversations/:conversation_id',
    operationId: 'getConversation',
    summary: 'Get a conversation',
    tag,
    auth: 'service-or-user',
    params: ConversationIdParams,
    responses: { 200: { description: 'The conversation', schema: Conversation }, ...common, ...notFound },
    handler: async ({ deps, principal, params }) => ({
      status: 200,
      body: presentConversation(await getConversationInScope(deps, principal, params.conversation_id)),
    }),
  }),
  defineRoute({
    method: 'patch',
    path: '/conversations/:conversation_id',
    operationId: 'updateConversation',
    summary: 'Update a conversation: title, status (archive), skills narrowing, runtime mode and TTL, filler, metadata',
    tag,
    auth: 'service-or-user',
    params: ConversationIdParams,
    body: PatchConversationBody,
    bodyExample: { title: 'Quarterly report (final)', status: 'archived' },
    responses: {
      200: { description: 'The updated conversation', schema: Conversation },
      ...common,
      ...notFound,
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: presentConversation(await patchConversation(deps, principal, params.conversation_id, body)),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/conversations/:conversation_id',
    operationId: 'deleteConversation',
    summary: 'Delete a conversation and its history',
    tag,
    auth: 'service-or-user',
    params: ConversationIdParams,
    responses: { 204: { description: 'Deleted' }, ...common, ...notFound },
    handler: async ({ deps, principal, params }) => {
      const conversation = await getConversationInScope(deps, principal, params.conversation_id);
      await removeConversation(deps, conversation);
      return { status: 204 };
    },
  }),
];
