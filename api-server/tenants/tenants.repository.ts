import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import { compiledOnce } from '../core/db/compiled-query.js';
import type { Db } from '../core/db/database.js';
import type { TenantsTable } from '../core/db/schema.js';
import { type PageDirection, pageQuery } from '../core/pagination.js';

/** A tenant's columns; its rendered `api_json` is read only where it is sent as it is (list pages, the warm upsert). */
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

const selectTenantByExternalId = compiledOnce((db: Db, integrationId: string, externalId: string) =>
  db.selectFrom('tenants').select(TENANT_COLUMNS).where('integration_id', '=', integrationId).where('external_id', '=', externalId),
);

export async function findTenantByExternalId(db: Db, integrationId: string, externalId: string): Promise<TenantRow | undefined> {
  return (await selectTenantByExternalId(db, integrationId, externalId))[0];
}

// The warm upsert's one query: the stored representation, which a warm upsert that changes nothing
// sends as it is (no row to parse, present and serialise again).
const selectTenantJsonByExternalId = compiledOnce((db: Db, integrationId: string, externalId: string) =>
  db.selectFrom('tenants').select('api_json as json').where('integration_id', '=', integrationId).where('external_id', '=', externalId),
);

/** The tenant's API representation as PostgreSQL keeps it (`api_json`, migration 0010). */
export async function findTenantJsonByExternalId(db: Db, integrationId: string, externalId: string): Promise<string | undefined> {
  return (await selectTenantJsonByExternalId(db, integrationId, externalId))[0]?.json;
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

export function updateTenant(db: Db, tenantId: string, changes: TenantUpdate): Promise<TenantRow> {
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

/** A listed tenant: its id (the cursor) and its stored representation (`api_json`). */
export type TenantJsonRow = { id: string; json: string };

/**
 * Up to `rowCount` tenants of an integration, the root left out: newest first, or oldest first for
 * `newer`; with `status`, only tenants in it.
 */
export function selectTenantPage(
  db: Db,
  page: {
    integrationId: string;
    status: TenantRow['status'] | undefined;
    direction: PageDirection;
    cursor: string | undefined;
    rowCount: number;
  },
): Promise<TenantJsonRow[]> {
  const { integrationId, status, direction, cursor, rowCount } = page;
  if (status === undefined) return selectPage(db, integrationId, direction, cursor ?? null, rowCount);
  const values = [integrationId, status, ...(cursor ? [cursor] : []), rowCount];
  return statusPageQuery(direction)(db, ...values);
}

// Migration 0011's `tenant_page`, which runs each page on one plan per connection (why: there).
const selectPage = compiledOnce((db: Db, integrationId: string, direction: PageDirection, cursor: string | null, rowCount: number) =>
  db
    .selectFrom(
      sql<{ tenant_id: string; tenant_json: string }>`tenant_page(${integrationId}, ${direction}, ${cursor}, ${rowCount})`.as('page'),
    )
    .select(['page.tenant_id as id', 'page.tenant_json as json']),
);

const statusPageQueries = new Map<PageDirection, (db: Db, ...args: unknown[]) => Promise<TenantJsonRow[]>>();

/**
 * The status-filtered page of one direction, compiled once: its arguments are the integration id,
 * the status, the cursor unless the newest page, the row count. PostgreSQL plans it with its values
 * on each run once the table is large (its generic plan, costed for `limit $n` at a tenth of the
 * rows, never looks cheaper); it is not forced generic as `tenant_page` is because no key range of
 * `tenants_list_status` ends where the status does (see migration 0011), and the generic plan may walk
 * the primary key with the integration as a filter, which for a small integration beside a large one
 * reads the whole table.
 */
function statusPageQuery(direction: PageDirection) {
  let run = statusPageQueries.get(direction);
  if (!run) {
    run = compiledOnce((db: Db, ...args: unknown[]) => {
      const [integrationId, status, ...rest] = args as string[];
      const q = db
        .selectFrom('tenants')
        .select(['id', 'api_json as json'])
        .where('integration_id', '=', integrationId!)
        // The root is the integration itself, not one of the tenants "under" it.
        .where('parent_id', 'is not', null)
        .where('status', '=', status as TenantRow['status']);
      const cursor = direction === 'newest' ? undefined : rest.shift();
      return pageQuery(q, 'id', direction, cursor, rest.shift() as unknown as number);
    });
    statusPageQueries.set(direction, run);
  }
  return run;
}
