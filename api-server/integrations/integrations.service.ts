import type { Db } from '../core/db/database.js';
import { isUniqueViolation, json } from '../core/db/database.js';
import { hashServiceKey, randomToken } from '../core/crypto.js';
import type { AppDeps } from '../deps.js';
import { SERVICE_KEY_PREFIX } from '../auth/authenticate.js';
import { TenantSettings } from '../tenants/tenants.schemas.js';

export function newServiceKey(): string {
  return `${SERVICE_KEY_PREFIX}${randomToken(40)}`;
}

export interface CreatedIntegration {
  id: string;
  name: string;
  rootTenantId: string;
  serviceKeyId: string;
  createdAt: Date;
}

/** An integration is a root tenant plus a service key that manages the root's subtree. */
export async function createIntegration(
  deps: Pick<AppDeps, 'db' | 'newId' | 'now'>,
  name: string,
  serviceKey: string,
): Promise<CreatedIntegration> {
  const now = deps.now();
  const id = deps.newId('integration');
  const rootTenantId = deps.newId('tenant');
  const serviceKeyId = deps.newId('serviceKey');
  await deps.db.transaction().execute(async (trx) => {
    await trx.insertInto('integrations').values({ id, name, root_tenant_id: rootTenantId, created_at: now }).execute();
    await trx
      .insertInto('tenants')
      .values({
        id: rootTenantId,
        integration_id: id,
        parent_id: null,
        external_id: null,
        name,
        status: 'active',
        repository_id: null,
        settings: json(TenantSettings.parse({})),
        metadata: json({}),
        created_at: now,
        updated_at: now,
      })
      .execute();
    await insertServiceKey(trx, { id: serviceKeyId, integrationId: id, key: serviceKey, now });
  });
  return { id, name, rootTenantId, serviceKeyId, createdAt: now };
}

export async function insertServiceKey(db: Db, key: { id: string; integrationId: string; key: string; now: Date }): Promise<void> {
  await db
    .insertInto('service_keys')
    .values({
      id: key.id,
      integration_id: key.integrationId,
      key_hash: hashServiceKey(key.key),
      // Enough to recognise a key in a listing, never enough to use it.
      hint: key.key.slice(-4),
      created_at: key.now,
      revoked_at: null,
    })
    .execute();
}

/** `ACIS_BOOTSTRAP_SERVICE_KEY`: make sure a root integration with this key exists (idempotent). */
export async function ensureBootstrapIntegration(
  deps: Pick<AppDeps, 'db' | 'newId' | 'now'>,
  serviceKey: string,
): Promise<{ created: boolean }> {
  const existing = await deps.db
    .selectFrom('service_keys')
    .select('id')
    .where('key_hash', '=', hashServiceKey(serviceKey))
    .executeTakeFirst();
  if (existing) return { created: false };
  try {
    await createIntegration(deps, 'bootstrap', serviceKey);
  } catch (error) {
    // Another node starting at the same moment inserted the key first: it exists, which is the goal.
    if (isUniqueViolation(error)) return { created: false };
    throw error;
  }
  return { created: true };
}
