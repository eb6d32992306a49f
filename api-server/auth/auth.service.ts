import type { z } from 'zod';
import { compiledOnce } from '../core/db/compiled-query.js';
import type { Db } from '../core/db/database.js';
import type { AppDeps } from '../deps.js';
import type { ServicePrincipal } from '../core/principal.js';
import { ProblemError, problems } from '../core/problems.js';
import type { Token, TokenExchangeBody } from './auth.schemas.js';
import { issueUserToken } from './tokens.js';

const selectExchangePair = compiledOnce((db: Db, integrationId: string, tenantExternalId: string, userExternalId: string) =>
  db
    .selectFrom('tenants')
    .innerJoin('users', 'users.tenant_id', 'tenants.id')
    .select(['tenants.id as tenant_id', 'tenants.status as tenant_status', 'users.id as user_id', 'users.status as user_status'])
    .where('tenants.integration_id', '=', integrationId)
    .where('tenants.external_id', '=', tenantExternalId)
    .where('users.external_id', '=', userExternalId),
);

/**
 * Token exchange: (tenant external id, user external id) → a platform JWT scoped to that user.
 * It never provisions; suspension of either party is enforced here, lazily.
 */
export async function exchangeToken(
  deps: AppDeps,
  principal: ServicePrincipal,
  body: z.output<typeof TokenExchangeBody>,
): Promise<z.output<typeof Token>> {
  const [row] = await selectExchangePair(deps.db, principal.integrationId, body.tenant_external_id, body.user_external_id);
  if (!row) throw problems.notFound('tenant or user with these external ids');
  if (row.tenant_status === 'suspended') {
    throw new ProblemError('tenant-suspended', 403, { detail: 'The tenant is suspended.' });
  }
  if (row.user_status === 'suspended') throw problems.forbidden('The user is deactivated.');

  const issued = issueUserToken(
    deps,
    { integrationId: principal.integrationId, tenantId: row.tenant_id, userId: row.user_id },
    body.ttl_seconds,
  );
  return {
    object: 'token',
    token: issued.token,
    token_type: 'Bearer',
    expires_at: issued.expiresAt.toISOString(),
    tenant_id: row.tenant_id,
    user_id: row.user_id,
  };
}
