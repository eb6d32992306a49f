import { defineRoute } from '../define-route.js';
import { Token, TokenExchangeBody } from './auth.schemas.js';
import { exchangeToken } from './auth.service.js';

export const authRoutes = [
  defineRoute({
    method: 'post',
    path: '/auth/token-exchange',
    operationId: 'exchangeToken',
    summary: 'Exchange a (tenant, user) external-id pair for a short-lived platform JWT',
    tag: 'Auth',
    auth: 'service',
    rateClass: 'token-exchange',
    body: TokenExchangeBody,
    bodyExample: { tenant_external_id: 'acme-corp', user_external_id: 'user-42', ttl_seconds: 900 },
    responses: {
      200: { description: 'The platform token', schema: Token },
      401: { description: 'Missing or unknown service key' },
      403: { description: 'Suspended tenant, deactivated user, or not a service key' },
      404: { description: 'Unknown tenant or user' },
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, principal, body }) => ({ status: 200, body: await exchangeToken(deps, principal, body) }),
  }),
];
