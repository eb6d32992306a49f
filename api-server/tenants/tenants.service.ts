import type { z } from 'zod';
import { json } from '../core/db/database.js';
import type { AppDeps } from '../deps.js';
import { changedFields, isEmpty } from '../core/merge.js';
import { type PageRequest, paginateWith } from '../core/pagination.js';
import type { ServicePrincipal } from '../core/principal.js';
import { findRepository } from '../repositories/repositories.repository.js';
import { problems } from '../core/problems.js';
import {
  deleteTenant,
  findTenant,
  findTenantByExternalId,
  findTenantJsonByExternalId,
  insertTenantIfAbsent,
  selectTenantPage,
  type TenantRow,
  updateTenant,
} from './tenants.repository.js';
import { type CreateTenantBody, type PatchTenantBody, type Tenant, TenantSettings, type UpsertTenantBody } from './tenants.schemas.js';

export function presentTenant(row: TenantRow): z.output<typeof Tenant> {
  return {
    object: 'tenant',
    id: row.id,
    external_id: row.external_id,
    name: row.name,
    status: row.status,
    parent_id: row.parent_id,
    repository_id: row.repository_id,
    settings: row.settings,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** A tenant of the caller's subtree, or 404 (missing and out-of-subtree cannot be told apart). */
export async function getTenantInScope(deps: AppDeps, principal: ServicePrincipal, tenantId: string): Promise<TenantRow> {
  const tenant = await findTenant(deps.db, principal.integrationId, tenantId);
  if (!tenant) throw problems.notFound('tenant');
  return tenant;
}

export async function getTenantByExternalId(deps: AppDeps, principal: ServicePrincipal, externalId: string): Promise<TenantRow> {
  const tenant = await findTenantByExternalId(deps.db, principal.integrationId, externalId);
  if (!tenant) throw problems.notFound('tenant');
  return tenant;
}

async function resolveParent(deps: AppDeps, principal: ServicePrincipal, parentId: string | undefined): Promise<string> {
  if (parentId === undefined) return principal.rootTenantId;
  const parent = await findTenant(deps.db, principal.integrationId, parentId);
  if (!parent) throw problems.invalid([{ pointer: '/parent_id', message: 'no such tenant' }]);
  return parent.id;
}

function newTenantRow(
  deps: AppDeps,
  principal: ServicePrincipal,
  fields: { externalId: string | null; name: string | null; parentId: string; settings?: object; metadata?: object },
) {
  const now = deps.now();
  return {
    id: deps.newId('tenant'),
    integration_id: principal.integrationId,
    parent_id: fields.parentId,
    external_id: fields.externalId,
    name: fields.name,
    status: 'active' as const,
    repository_id: null,
    settings: json(fields.settings ?? TenantSettings.parse({})),
    metadata: json(fields.metadata ?? {}),
    created_at: now,
    updated_at: now,
  };
}

export async function createTenant(
  deps: AppDeps,
  principal: ServicePrincipal,
  body: z.output<typeof CreateTenantBody>,
): Promise<TenantRow> {
  const parentId = await resolveParent(deps, principal, body.parent_id);
  const row = newTenantRow(deps, principal, {
    externalId: body.external_id ?? null,
    name: body.name,
    parentId,
    settings: body.settings,
    metadata: body.metadata,
  });
  const created = await insertTenantIfAbsent(deps.db, row);
  if (created) return created;
  const holder = await findTenantByExternalId(deps.db, principal.integrationId, row.external_id ?? '');
  throw problems.externalIdConflict(holder?.id, 'A tenant with this external_id exists.');
}

/** A tenant as a response shows it: presented from its row, or the JSON text PostgreSQL keeps (`api_json`). */
export type TenantRepresentation = z.output<typeof Tenant> | string;

/**
 * Get-or-create-or-refresh. Concurrent calls for one external id collapse on the unique constraint:
 * exactly one inserts (201), the others read the winner's row and merge into it (200). A suspended
 * tenant is returned as it is; status is not an upsert field, so nothing here reactivates it.
 * The warm path reads the tenant's stored representation, compares the body with it (it holds every
 * field an upsert merges into, and the parent), and sends it as it is when nothing changes.
 */
export async function upsertTenant(
  deps: AppDeps,
  principal: ServicePrincipal,
  externalId: string,
  body: z.output<typeof UpsertTenantBody>,
): Promise<{ created: boolean; tenant: TenantRepresentation }> {
  let stored = await findTenantJsonByExternalId(deps.db, principal.integrationId, externalId);
  if (stored === undefined) {
    const parentId = await resolveParent(deps, principal, body.parent_id);
    const row = newTenantRow(deps, principal, {
      externalId,
      name: body.name ?? null,
      parentId,
      settings: body.settings,
      metadata: body.metadata,
    });
    const created = await insertTenantIfAbsent(deps.db, row);
    if (created) return { created: true, tenant: presentTenant(created) };
    stored = await findTenantJsonByExternalId(deps.db, principal.integrationId, externalId);
    if (stored === undefined) throw new Error('tenant vanished between a conflicting insert and its read');
  }
  const { parent_id: requestedParentId, ...mergeable } = body;
  const existing = JSON.parse(stored) as z.output<typeof Tenant>;
  if (requestedParentId !== undefined && requestedParentId !== existing.parent_id) {
    throw problems.invalid([{ pointer: '/parent_id', message: 'parent_id cannot change after creation' }]);
  }
  const changes = changedFields(existing, mergeable);
  if (isEmpty(changes)) return { created: false, tenant: stored };
  return { created: false, tenant: presentTenant(await writeChanges(deps, existing.id, changes)) };
}

export async function patchTenant(
  deps: AppDeps,
  principal: ServicePrincipal,
  tenantId: string,
  body: z.output<typeof PatchTenantBody>,
): Promise<TenantRow> {
  const tenant = await getTenantInScope(deps, principal, tenantId);
  const changes = changedFields(tenant, body);
  return isEmpty(changes) ? tenant : writeChanges(deps, tenant.id, changes);
}

type TenantChanges = { name?: string | null; status?: 'active' | 'suspended'; settings?: object; metadata?: object };

function writeChanges(deps: AppDeps, tenantId: string, changes: TenantChanges): Promise<TenantRow> {
  return updateTenant(deps.db, tenantId, {
    ...(changes.name !== undefined && { name: changes.name }),
    ...(changes.status !== undefined && { status: changes.status }),
    ...(changes.settings !== undefined && { settings: json(changes.settings) }),
    ...(changes.metadata !== undefined && { metadata: json(changes.metadata) }),
    updated_at: deps.now(),
  });
}

/**
 * A page of tenants, each as the JSON text of `presentTenant` that PostgreSQL keeps in `api_json`
 * (migration 0010): the route sends it as it is.
 */
export async function listTenants(
  deps: AppDeps,
  principal: ServicePrincipal,
  query: PageRequest & { status?: 'active' | 'suspended' | undefined },
) {
  return paginateWith(query, (direction, cursor, rowCount) =>
    selectTenantPage(deps.db, { integrationId: principal.integrationId, status: query.status, direction, cursor, rowCount }),
  );
}

export async function removeTenant(deps: AppDeps, principal: ServicePrincipal, tenant: TenantRow): Promise<void> {
  if (tenant.id === principal.rootTenantId) {
    throw problems.forbidden('The integration root tenant cannot be deleted with the service key.');
  }
  await deleteTenant(deps.db, tenant.id);
}

export async function attachRepository(
  deps: AppDeps,
  principal: ServicePrincipal,
  tenantId: string,
  repositoryId: string | null,
): Promise<TenantRow> {
  const tenant = await getTenantInScope(deps, principal, tenantId);
  if (repositoryId !== null) {
    const repository = await findRepository(deps.db, principal.integrationId, repositoryId);
    if (!repository) throw problems.invalid([{ pointer: '/repository_id', message: 'no such repository' }]);
  }
  if (tenant.repository_id === repositoryId) return tenant;
  return updateTenant(deps.db, tenant.id, { repository_id: repositoryId, updated_at: deps.now() });
}
