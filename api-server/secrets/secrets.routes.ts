import { ConversationIdParams } from '../conversations/conversations.schemas.js';
import { defineRoute } from '../define-route.js';
import { TenantIdParams } from '../tenants/tenants.schemas.js';
import { UserIdParams } from '../users/users.schemas.js';
import {
  ConversationSecretList,
  ConversationSecretParams,
  ListSecretsQuery,
  PutSecretsBody,
  TenantSecretList,
  TenantSecretParams,
  UserSecretList,
  UserSecretParams,
} from './secrets.schemas.js';
import {
  deleteConversationSecret,
  deleteTenantSecret,
  deleteUserSecret,
  listConversationSecrets,
  listTenantSecrets,
  listUserSecrets,
  putConversationSecrets,
  putTenantSecrets,
  putUserSecrets,
} from './secrets.service.js';

const tag = 'Secrets';
const putSummary = (scope: string) =>
  `Vault ${scope} secrets: merge-upsert per alias (existing aliases overwritten, others untouched); values are write-only`;

const conversationCommon = {
  401: { description: 'Missing or invalid credential' },
  403: { description: 'Beyond the token’s user, or (writes) tenant suspended (tenant-suspended)' },
  404: { description: 'No such conversation' },
};
const serviceCommon = {
  401: { description: 'Missing, unknown or revoked service key' },
  403: { description: 'Not a service key' },
};

export const secretRoutes = [
  defineRoute({
    method: 'put',
    path: '/conversations/:conversation_id/secrets',
    operationId: 'putConversationSecrets',
    summary: putSummary('conversation'),
    tag,
    auth: 'service-or-user',
    params: ConversationIdParams,
    body: PutSecretsBody,
    bodyExample: { secrets: { SLACK_TOKEN: 'xoxb-example' } },
    responses: {
      200: { description: "The conversation's secrets, all of them (aliases and timestamps only)", schema: ConversationSecretList },
      ...conversationCommon,
      409: { description: 'The conversation is archived (conversation-archived)' },
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: await putConversationSecrets(deps, principal, params.conversation_id, body.secrets),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/conversations/:conversation_id/secrets',
    operationId: 'listConversationSecrets',
    summary: "List a conversation's secrets by alias, A to Z (aliases and timestamps only)",
    tag,
    auth: 'service-or-user',
    params: ConversationIdParams,
    query: ListSecretsQuery,
    responses: {
      200: { description: 'A page', schema: ConversationSecretList },
      400: { description: 'Bad query' },
      ...conversationCommon,
    },
    handler: async ({ deps, principal, params, query }) => ({
      status: 200,
      body: await listConversationSecrets(deps, principal, params.conversation_id, query),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/conversations/:conversation_id/secrets/:alias',
    operationId: 'deleteConversationSecret',
    summary: 'Remove a conversation secret',
    tag,
    auth: 'service-or-user',
    params: ConversationSecretParams,
    responses: {
      204: { description: 'Deleted' },
      ...conversationCommon,
      404: { description: 'No such conversation, or no secret under this alias' },
      409: { description: 'The conversation is archived (conversation-archived)' },
    },
    handler: async ({ deps, principal, params }) => {
      await deleteConversationSecret(deps, principal, params.conversation_id, params.alias);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'put',
    path: '/users/:user_id/secrets',
    operationId: 'putUserSecrets',
    summary: putSummary('user'),
    tag,
    auth: 'service',
    params: UserIdParams,
    body: PutSecretsBody,
    bodyExample: { secrets: { GITHUB_TOKEN: 'ghp_exampleexampleexample' } },
    responses: {
      200: { description: "The user's secrets, all of them (aliases and timestamps only)", schema: UserSecretList },
      ...serviceCommon,
      404: { description: 'No such user in this integration' },
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: await putUserSecrets(deps, principal, params.user_id, body.secrets),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/users/:user_id/secrets',
    operationId: 'listUserSecrets',
    summary: "List a user's secrets by alias, A to Z (aliases and timestamps only)",
    tag,
    auth: 'service',
    params: UserIdParams,
    query: ListSecretsQuery,
    responses: {
      200: { description: 'A page', schema: UserSecretList },
      400: { description: 'Bad query' },
      ...serviceCommon,
      404: { description: 'No such user in this integration' },
    },
    handler: async ({ deps, principal, params, query }) => ({
      status: 200,
      body: await listUserSecrets(deps, principal, params.user_id, query),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/users/:user_id/secrets/:alias',
    operationId: 'deleteUserSecret',
    summary: 'Remove a user secret',
    tag,
    auth: 'service',
    params: UserSecretParams,
    responses: { 204: { description: 'Deleted' }, ...serviceCommon, 404: { description: 'No such user, or no secret under this alias' } },
    handler: async ({ deps, principal, params }) => {
      await deleteUserSecret(deps, principal, params.user_id, params.alias);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'put',
    path: '/tenants/:tenant_id/secrets',
    operationId: 'putTenantSecrets',
    summary: `${putSummary('tenant')}. Child tenants inherit them`,
    tag,
    auth: 'service',
    params: TenantIdParams,
    body: PutSecretsBody,
    bodyExample: { secrets: { CRM_API_KEY: 'example-key' } },
    responses: {
      200: { description: "The tenant's secrets, all of them (aliases and timestamps only)", schema: TenantSecretList },
      ...serviceCommon,
      404: { description: 'No such tenant in this integration' },
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: await putTenantSecrets(deps, principal, params.tenant_id, body.secrets),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/tenants/:tenant_id/secrets',
    operationId: 'listTenantSecrets',
    summary: "List a tenant's own secrets by alias, A to Z (aliases and timestamps only)",
    tag,
    auth: 'service',
    params: TenantIdParams,
    query: ListSecretsQuery,
    responses: {
      200: { description: 'A page', schema: TenantSecretList },
      400: { description: 'Bad query' },
      ...serviceCommon,
      404: { description: 'No such tenant in this integration' },
    },
    handler: async ({ deps, principal, params, query }) => ({
      status: 200,
      body: await listTenantSecrets(deps, principal, params.tenant_id, query),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/tenants/:tenant_id/secrets/:alias',
    operationId: 'deleteTenantSecret',
    summary: 'Remove a tenant secret',
    tag,
    auth: 'service',
    params: TenantSecretParams,
    responses: { 204: { description: 'Deleted' }, ...serviceCommon, 404: { description: 'No such tenant, or no secret under this alias' } },
    handler: async ({ deps, principal, params }) => {
      await deleteTenantSecret(deps, principal, params.tenant_id, params.alias);
      return { status: 204 };
    },
  }),
];
