import { createPublicKey, randomBytes } from 'node:crypto';
import type { z } from 'zod';
import { forgetServiceKeys } from '../auth/authenticate.js';
import type { AppDeps } from '../deps.js';
import { problems } from '../core/problems.js';
import { createIntegration, insertServiceKey, newServiceKey } from '../integrations/integrations.service.js';
import type { CreateApproverKeyBody, CreatedApproverKey, CreatedIntegration, CreatedServiceKey } from './admin.schemas.js';

/** Operator actions behind `ACIS_ADMIN_TOKEN`; the service key can reach none of them. */

export async function adminCreateIntegration(deps: AppDeps, name: string): Promise<z.output<typeof CreatedIntegration>> {
  const serviceKey = newServiceKey();
  const integration = await createIntegration(deps, name, serviceKey);
  return {
    object: 'integration',
    id: integration.id,
    name: integration.name,
    root_tenant_id: integration.rootTenantId,
    service_key: serviceKey,
    service_key_id: integration.serviceKeyId,
    created_at: integration.createdAt.toISOString(),
  };
}

export async function adminCreateServiceKey(deps: AppDeps, integrationId: string): Promise<z.output<typeof CreatedServiceKey>> {
  const integration = await deps.db.selectFrom('integrations').select('id').where('id', '=', integrationId).executeTakeFirst();
  if (!integration) throw problems.notFound('integration');
  const serviceKey = newServiceKey();
  const id = deps.newId('serviceKey');
  const now = deps.now();
  await insertServiceKey(deps.db, { id, integrationId, key: serviceKey, now });
  return { object: 'service_key', id, integration_id: integrationId, service_key: serviceKey, created_at: now.toISOString() };
}

export async function adminRevokeServiceKey(deps: AppDeps, serviceKeyId: string): Promise<void> {
  const result = await deps.db
    .updateTable('service_keys')
    .set({ revoked_at: deps.now() })
    .where('id', '=', serviceKeyId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) === 0) throw problems.notFound('service key');
  forgetServiceKeys(deps);
}

/** The vault context (AAD) of an approver key's HMAC secret. */
export function approverKeyContext(approverKeyId: string): string {
  return `approver_key:${approverKeyId}`;
}

const ED25519_KEY_BYTES = 32;
const HMAC_KEY_BYTES = 32;

export async function adminCreateApproverKey(
  deps: AppDeps,
  tenantId: string,
  body: z.output<typeof CreateApproverKeyBody>,
): Promise<z.output<typeof CreatedApproverKey>> {
  const tenant = await deps.db.selectFrom('tenants').select('id').where('id', '=', tenantId).executeTakeFirst();
  if (!tenant) throw problems.notFound('tenant');
  const id = deps.newId('approverKey');
  const now = deps.now();
  let secret: string | undefined;
  let secretCiphertext: string | null = null;
  let publicKey: string | null = null;
  if (body.algorithm === 'hmac-sha256') {
    secret = randomBytes(HMAC_KEY_BYTES).toString('base64url');
    secretCiphertext = deps.vault.encrypt(secret, approverKeyContext(id));
  } else {
    publicKey = validEd25519PublicKey(body.public_key ?? '');
  }
  await deps.db
    .insertInto('approver_keys')
    .values({
      id,
      tenant_id: tenantId,
      algorithm: body.algorithm,
      secret_ciphertext: secretCiphertext,
      public_key: publicKey,
      created_at: now,
      revoked_at: null,
    })
    .execute();
  return {
    object: 'approver_key',
    id,
    tenant_id: tenantId,
    algorithm: body.algorithm,
    ...(secret !== undefined && { secret }),
    created_at: now.toISOString(),
  };
}

function validEd25519PublicKey(encoded: string): string {
  const raw = Buffer.from(encoded, 'base64url');
  const invalid = problems.invalid([{ pointer: '/public_key', message: 'must be base64url of a raw 32-byte Ed25519 public key' }]);
  if (raw.length !== ED25519_KEY_BYTES || raw.toString('base64url') !== encoded.replace(/=+$/, '')) throw invalid;
  try {
    createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
  } catch {
    throw invalid;
  }
  return raw.toString('base64url');
}

export async function adminRevokeApproverKey(deps: AppDeps, approverKeyId: string): Promise<void> {
  const result = await deps.db
    .updateTable('approver_keys')
    .set({ revoked_at: deps.now() })
    .where('id', '=', approverKeyId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) === 0) throw problems.notFound('approver key');
}
