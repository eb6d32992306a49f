import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import { compiledOnce } from '../core/db/compiled-query.js';
import type { Db } from '../core/db/database.js';
import type { TenantsTable } from '../core/db/schema.js';

/** A tenant's columns; its rendered `api_json` is read only by list pages. */
export type TenantRow = Omit<Selectable<TenantsTable>, 'api_json'>;
export type TenantInsert = Insertable<TenantsTable>;
export type TenantUpdate = Updateable<TenantsTable>;

/** Data access for tenants: plain functions taking the db (or a transaction) first. */

const TENANT_COLUMNS = [
  'id',
  'integration_id',
  'parent_id',
  'external_id',
  'name',
  'status',
  'repository_id',
  'settings',
  'metadata',
  'created_at',
  'updated_at',
] as const satisfies ReadonlyArray<keyof TenantRow>;

const selectTenant = compiledOnce((db: Db, integrationId: string, tenantId: string) =>
  db.selectFrom('tenants').select(TENANT_COLUMNS).where('integration_id', '=', integrationId).where('id', '=', tenantId),
);

export async function findTenant(db: Db, integrationId: string, tenantId: string): Promise<TenantRow | undefined> {
  return (await selectTenant(db, integrationId, tenantId))[0];
}

// The warm upsert's one query.
const selectTenantByExternalId = compiledOnce((db: Db, integrationId: string, externalId: string) =>
  db.selectFrom('tenants').select(TENANT_COLUMNS).where('integration_id', '=', integrationId).where('external_id', '=', externalId),
);

export async function findTenantByExternalId(db: Db, integrationId: string, externalId: string): Promise<TenantRow | undefined> {
  return (await selectTenantByExternalId(db, integrationId, externalId))[0];
}

/** Inserts unless the (integration, external id) is taken; undefined means another writer holds it. */
export function insertTenantIfAbsent(db: Db, row: TenantInsert): Promise<TenantRow | undefined> {
  return db
    .insertInto('tenants')
    .values(row)
    .onConflict((oc) => oc.columns(['integration_id', 'external_id']).doNothing())
    .returning(TENANT_COLUMNS)
    .executeTakeFirst();
}

export function updateTenant(
  db: Db,
  tenantId: string,
  changes: TenantUpdate,
): Promise<TenantRow> {
  return db.updateTable('tenants').set(changes).where('id', '=', tenantId).returning(TENANT_COLUMNS).executeTakeFirstOrThrow();
}

export async function deleteTenant(db: Db, tenantId: string): Promise<void> {
  await db.deleteFrom('tenants').where('id', '=', tenantId).execute();
}

/** The repository of the tenant or, when it has none of its own, of its nearest ancestor that has one. */
export async function effectiveRepositoryId(db: Db, tenantId: string): Promise<string | null> {
  const result = await sql<{ repository_id: string }>`
    with recursive chain (id, parent_id, repository_id, depth) as (
      select id, parent_id, repository_id, 0 from tenants where id = ${tenantId}
      union all
      select t.id, t.parent_id, t.repository_id, chain.depth + 1
      from tenants t join chain on t.id = chain.parent_id
      where chain.repository_id is null
    )
    select repository_id from chain where repository_id is not null order by depth limit 1
  `.execute(db);
  return result.rows[0]?.repository_id ?? null;
}
