import { defineRoute } from '../define-route.js';
import { problems } from '../core/problems.js';
import { Integration } from './integrations.schemas.js';

export const integrationRoutes = [
  defineRoute({
    method: 'get',
    path: '/integration',
    operationId: 'getIntegration',
    summary: 'The calling integration: its root tenant and the ids of its approver keys',
    tag: 'Integration',
    auth: 'service',
    responses: {
      200: { description: 'The integration self record', schema: Integration },
      401: { description: 'Missing, unknown or revoked service key' },
      403: { description: 'Not a service key' },
    },
    handler: async ({ deps, principal }) => {
      const integration = await deps.db.selectFrom('integrations').selectAll().where('id', '=', principal.integrationId).executeTakeFirst();
      if (!integration) throw problems.notFound('integration');
      const keys = await deps.db
        .selectFrom('approver_keys')
        .innerJoin('tenants', 'tenants.id', 'approver_keys.tenant_id')
        .select(['approver_keys.id', 'approver_keys.tenant_id', 'approver_keys.algorithm', 'approver_keys.created_at'])
        .where('tenants.integration_id', '=', principal.integrationId)
        .where('approver_keys.revoked_at', 'is', null)
        .orderBy('approver_keys.id')
        .execute();
      return {
        status: 200,
        body: {
          object: 'integration',
          id: integration.id,
          name: integration.name,
          root_tenant_id: integration.root_tenant_id,
          approver_keys: keys.map((key) => ({
            object: 'approver_key',
            id: key.id,
            tenant_id: key.tenant_id,
            algorithm: key.algorithm,
            created_at: key.created_at.toISOString(),
          })),
          created_at: integration.created_at.toISOString(),
        },
      };
    },
  }),
];
