import { NDJSON } from '../core/http/route-result.js';
import { defineRoute } from '../define-route.js';
import { mapPage } from '../core/pagination.js';
import { problems } from '../core/problems.js';
import { getConversationInScope } from '../conversations/conversations.service.js';
import { ConversationIdParams } from '../conversations/conversations.schemas.js';
import { presentMessage } from './messages.presenter.js';
import { findMessage } from './messages.repository.js';
import {
  ListMessagesQuery,
  Message,
  MessageList,
  MessageStreamParams,
  MessageStreamQuery,
  SendMessageBody,
  SendMessageQuery,
} from './messages.schemas.js';
import { StreamLine } from './message-body.schemas.js';
import { listMessages } from './messages.service.js';
import { sendAndRespond, streamResponse } from './send.js';

const tag = 'Messages';
const common = {
  401: { description: 'Missing or invalid credential' },
  403: { description: 'Beyond the token’s user, or tenant suspended (tenant-suspended)' },
  404: { description: 'No such conversation' },
};

export const messageRoutes = [
  defineRoute({
    method: 'post',
    path: '/conversations/:conversation_id/messages',
    operationId: 'sendMessage',
    summary: 'Append a user message and run the agent; streams NDJSON (stream=true) or blocks (stream=false)',
    tag,
    auth: 'service-or-user',
    rateClass: 'message-send',
    params: ConversationIdParams,
    query: SendMessageQuery,
    body: SendMessageBody,
    bodyExample: {
      content: "Post the summary to the team's channel.",
      env: { CHANNEL: '#reports' },
      secrets: { SLACK_TOKEN: 'xoxb-example' },
      on_capacity: 'hold',
    },
    idempotent: true,
    responses: {
      200: { description: 'The run as NDJSON lines (stream=true)', contentType: NDJSON, schema: StreamLine },
      201: { description: 'The completed assistant message (stream=false)', schema: Message },
      ...common,
      409: { description: 'conversation-archived, or conversation-busy while a run is in flight' },
      422: { description: 'Invalid body, skills outside the conversation, missing-secret (stream=false)' },
      429: { description: 'capacity-exhausted, with Retry-After' },
      503: { description: 'shutting-down (this node takes no new messages; retry), or with stream=false sandbox-unavailable' },
    },
    handler: async ({ deps, principal, params, query, body, ctx, requestId }) => {
      const conversation = await getConversationInScope(deps, principal, params.conversation_id);
      return sendAndRespond(deps, conversation, body, {
        stream: query.stream,
        onCapacity: body.on_capacity ?? 'reject',
        leadingLines: [],
        baseUrl: deps.config.publicUrl ?? `${ctx.protocol}://${ctx.host}`,
        requestId,
      });
    },
  }),
  defineRoute({
    method: 'get',
    path: '/conversations/:conversation_id/messages',
    operationId: 'listMessages',
    summary: 'List the messages of a conversation, newest first',
    tag,
    auth: 'service-or-user',
    params: ConversationIdParams,
    query: ListMessagesQuery,
    responses: { 200: { description: 'A page', schema: MessageList }, 400: { description: 'Bad query' }, ...common },
    handler: async ({ deps, principal, params, query }) => ({
      status: 200,
      body: mapPage(await listMessages(deps, principal, params.conversation_id, query), presentMessage),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/conversations/:conversation_id/messages/:message_id/stream',
    operationId: 'reattachMessageStream',
    summary: 'Re-attach to a run: replay its lines after the first `after`, then follow it live to the terminal line',
    tag,
    auth: 'service-or-user',
    params: MessageStreamParams,
    query: MessageStreamQuery,
    responses: {
      200: { description: 'The run’s lines after `after` as NDJSON (pings are not counted)', contentType: NDJSON, schema: StreamLine },
      400: { description: 'Bad query' },
      ...common,
    },
    handler: async ({ deps, principal, params, query }) => {
      await getConversationInScope(deps, principal, params.conversation_id);
      const message = await findMessage(deps.db, params.conversation_id, params.message_id);
      if (message?.role !== 'assistant') throw problems.notFound('run');
      return streamResponse(message.id, query.after);
    },
  }),
];
